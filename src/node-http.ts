// node:http taken with require, never with an ES import. An ES import of a built-in module builds
// its whole namespace, and reading node:http's WebSocket, CloseEvent and MessageEvent exports loads
// Node's bundled copy of undici: some 13 MiB resident, held from start, for nothing this server
// uses (its own outbound HTTP is the undici package, loaded on first use). Type-only imports of
// node:http are erased and stay as they are.
import { createRequire } from 'node:module'

export const http = createRequire(import.meta.url)('node:http') as typeof import('node:http')
