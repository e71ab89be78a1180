// Preloaded into a Node program (`node --import ./bearer-header.mjs ...`): every HTTP request
// it makes, through fetch or undici, carries `Authorization: Bearer $FILEMEM_MCP_TOKEN`.
//
// `filemem mcp --http` answers only requests with its token, and the official conformance
// tool (@modelcontextprotocol/conformance) has no option to send a header. Node's fetch and
// the undici package share one global dispatcher, so replacing it adds the header to the
// SDK client's requests, the tool's raw fetches and its undici requests alike. Every other
// header (Host, Origin, ...) is sent as the tool wrote it.
import { Agent, setGlobalDispatcher } from 'undici';

const token = process.env.FILEMEM_MCP_TOKEN;
if (!token) throw new Error('bearer-header.mjs: set FILEMEM_MCP_TOKEN to the server token');
const authorization = `Bearer ${token}`;

// the shapes undici takes: a flat [name, value, ...] array, [name, value] pairs, an object
function withToken(given) {
  if (given == null) return { authorization };
  if (Array.isArray(given)) return [...given, 'authorization', authorization];
  if (typeof given[Symbol.iterator] === 'function') return [...given, ['authorization', authorization]];
  return { ...given, authorization };
}

class BearerAgent extends Agent {
  dispatch(options, handler) {
    return super.dispatch({ ...options, headers: withToken(options.headers) }, handler);
  }
}

setGlobalDispatcher(new BearerAgent());
