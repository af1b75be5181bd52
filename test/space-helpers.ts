// Shared by the space primitive suites: what an XRPC error thrown by a primitive would answer.
import { XRPCError } from '@atproto/xrpc-server'

export type Answer = { status: number; error: string | undefined }

/** the status and error name `fn` throws (it must throw an XRPCError) */
export async function answerOf(fn: () => unknown): Promise<Answer> {
  try {
    await fn()
  } catch (err) {
    if (err instanceof XRPCError) return { status: err.statusCode, error: err.error }
    throw err
  }
  throw new Error('expected an XRPC error, nothing was thrown')
}

export const hex = (b: Uint8Array) => Buffer.from(b).toString('hex')

export const SPACE = 'at://did:plc:authority234567abcdefghij/space/com.example.forum/3kd2bxmiyd42b'
export const AUTHORITY = 'did:plc:authority234567abcdefghij'
export const ALICE = 'did:plc:alice234567abcdefghijkl'
