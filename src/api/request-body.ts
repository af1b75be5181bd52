// Raw request bodies (uploadBlob, importRepo) reach handlers through the Content-Encoding decoders:
// bytes that do not decode are the client's fault, a 400 rather than a 500.
import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import { XRPCError } from '@atproto/xrpc-server'
import { xrpcError } from '../errors.js'

/** `body` as is when nothing decodes it, else with decoding failures turned into InvalidRequest */
export function decodedBody(req: IncomingMessage, body: Readable): Readable {
  if (!req.headers['content-encoding']) return body
  return Readable.from(rethrowAsInvalid(body), { objectMode: false })
}

async function* rethrowAsInvalid(body: AsyncIterable<Uint8Array>) {
  try {
    yield* body
  } catch (err) {
    if (err instanceof XRPCError) throw err
    throw xrpcError('InvalidRequest', `Request body could not be decoded: ${(err as Error)?.message ?? err}`)
  }
}
