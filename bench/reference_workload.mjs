// Runs bench/versus_reference.py's workload on the reference implementation (dsh-memento,
// node:sqlite) in this process, without the DSH host: its SQLite store (lib/store.mjs) under
// its protocol core (lib/protocol.mjs), with a gate that allows every write (the `auto`
// policy). Called by versus_reference.py; prints one JSON object of samples in ms.
//
//   node bench/reference_workload.mjs REFERENCE_DIR WORKLOAD.json DB_PATH

import { readFileSync } from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const [referenceDir, workloadPath, dbPath] = process.argv.slice(2)
if (!referenceDir || !workloadPath || !dbPath) {
  console.error('usage: node reference_workload.mjs REFERENCE_DIR WORKLOAD.json DB_PATH')
  process.exit(2)
}
const lib = (name) => pathToFileURL(path.join(referenceDir, 'lib', name)).href
const { openMemoryStore } = await import(lib('store.mjs'))
const { MemoryProtocolCore } = await import(lib('protocol.mjs'))

const work = JSON.parse(readFileSync(workloadPath, 'utf8'))
const store = openMemoryStore(dbPath)
const core = new MemoryProtocolCore({
  store, budgets: work.budgets, writePolicy: 'auto', gate: async () => 'allowed-once',
})

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6

async function timed (items, fn) {
  const out = []
  for (const item of items) {
    const t0 = process.hrtime.bigint()
    await fn(item)
    out.push(ms(t0))
  }
  return out
}

for (const batch of work.prefill) await core.seed(batch.inputs, batch.write)
const samples = {}
samples.add = await timed(work.adds, (w) => core.add(w.input, w.write))
samples.query = await timed(work.queries, (q) => core.query(q.filter, q.opts ?? {}))
samples.replace = await timed(work.replaces, (w) => core.replace(w.input, w.write))
samples.remove = await timed(work.removes, (w) => core.remove(w.input, w.write))
samples.seed = await timed(work.seeds, (s) => core.seed(s.inputs, s.write))
samples.auditList = await timed(Array(work.auditRuns).fill(work.auditLimit),
  (n) => store.auditList(n))
store.close()
process.stdout.write(JSON.stringify({ node: process.version, samples }) + '\n')
