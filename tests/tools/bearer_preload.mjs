// Preloaded into the MCP conformance CLI (node --import): adds `Authorization: Bearer $JG_MCP_TOKEN`
// to every HTTP request it makes, through undici's global dispatcher (used by fetch and undici.request),
// so the unmodified suite can test a server that requires a token.
import { createRequire } from "node:module";

const token = process.env.JG_MCP_TOKEN;
if (!token) throw new Error("JG_MCP_TOKEN is not set");
const { getGlobalDispatcher, setGlobalDispatcher } = createRequire(process.argv[1])("undici");

function withToken(headers) {
  const value = `Bearer ${token}`;
  if (Array.isArray(headers)) return [...headers, "authorization", value];
  return { ...(headers ?? {}), authorization: value };
}

setGlobalDispatcher(
  getGlobalDispatcher().compose((dispatch) => (opts, handler) => dispatch({ ...opts, headers: withToken(opts.headers) }, handler)),
);
