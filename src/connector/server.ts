import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { callTool } from './call.js';
import type { Connection } from './connection.js';
import { TOOL_DEFS, type ToolDef } from './tool-defs.js';

/**
 * The MCP server of one connection: every tool is registered through `callTool`, the one gate (no
 * tool has a handler of its own), so there is no ungated path.
 */

const INSTRUCTIONS =
  'Terminals you may drive are those list_terminals returns; ids (%12, kitty:7) are the surest target. What you may do is fixed by your grant: a call outside it is refused with a code (E_SCOPE, E_TARGET_NOT_BOUND…) and a reason. Every write is recorded.';

export function createConnectorServer(
  connection: Connection,
  info: { version: string },
  defs: readonly ToolDef[] = TOOL_DEFS,
): McpServer {
  const server = new McpServer(
    { name: 'the-loop', version: info.version },
    // An argument list larger than this is refused before validation (a deeply nested hostile one).
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS, maxToolInputElements: 256 },
  );
  for (const def of defs) {
    server.registerTool(
      def.name,
      {
        title: def.title,
        description: def.description,
        inputSchema: def.input,
        outputSchema: def.output,
        annotations: { title: def.title, ...def.annotations },
      },
      (args: Record<string, unknown>, extra: { signal?: AbortSignal }) =>
        callTool(connection, def, args, extra.signal),
    );
  }
  return server;
}
