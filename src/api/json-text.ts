// Responses built as JSON text by the handler (record values come from a cache of JSON text):
// sent as they are, where xrpc-server would walk the body (lexToJson) and express stringify it.
import type { Lexicons } from '@atproto/lexicon'
import { jsonToLex } from '@atproto/lexicon'

/**
 * A body already serialized as JSON, shaped as the method's output so handlers keep their
 * signatures; xrpc-server sends `buffer` as a pass-through body (it looks for `buffer` before
 * `body`). `text` must be valid JSON of the output schema: with response validation on (the
 * tests), start/http.ts checks it like any other.
 */
class JsonText<T> {
  readonly encoding = 'application/json' as const
  readonly buffer: Buffer
  constructor(text: string) {
    this.buffer = Buffer.from(text)
  }
  /** the value, parsed again: only for readers other than xrpc-server */
  get body(): T {
    return JSON.parse(this.buffer.toString('utf8'))
  }
}

export function jsonText<T>(text: string): { encoding: 'application/json'; body: T } {
  return new JsonText<T>(text)
}

/** throws when `output` is JSON text that does not match the method's output schema */
export function assertValidJsonText(lex: Lexicons, nsid: string, output: unknown) {
  if (!(output instanceof JsonText)) return
  lex.assertValidXrpcOutput(nsid, jsonToLex(JSON.parse(output.buffer.toString('utf8'))))
}

/**
 * `{}` for a procedure whose official lexicon declares no output: official clients accept any
 * body there, and callers that parse the answer as JSON get an object.
 */
export const emptyObject: () => void = () => jsonText('{}')
