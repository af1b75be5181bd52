// Responses built as JSON text by the handler (record values come from a cache of JSON text):
// sent as they are, where xrpc-server would walk the body (lexToJson) and express stringify it.
import type { Lexicons } from '@atproto/lexicon'
import { jsonToLex } from '@atproto/lexicon'

const JSON_TEXT = Symbol('json text')

/**
 * A body already serialized as JSON, typed as the method's output so handlers keep their
 * signatures; xrpc-server sends it as a pass-through buffer. `text` must be valid JSON of the
 * output schema: with response validation on (the tests), server.ts checks it like any other.
 */
export function jsonText<T>(text: string): { encoding: 'application/json'; body: T } {
  const out = { encoding: 'application/json', buffer: Buffer.from(text), [JSON_TEXT]: true }
  return out as unknown as { encoding: 'application/json'; body: T }
}

/** throws when `output` is JSON text that does not match the method's output schema */
export function assertValidJsonText(lex: Lexicons, nsid: string, output: unknown) {
  if (!output || typeof output !== 'object' || !(JSON_TEXT in output)) return
  const { buffer } = output as unknown as { buffer: Buffer }
  lex.assertValidXrpcOutput(nsid, jsonToLex(JSON.parse(buffer.toString('utf8'))))
}

/**
 * `{}` for a procedure whose official lexicon declares no output: official clients accept any
 * body there, and callers that parse the answer as JSON get an object.
 */
export function emptyObject(): void {
  return jsonText('{}') as unknown as void
}
