// Outbound HTTP through undici, loaded on first use: a server that has no relay, PLC directory,
// OAuth client or AppView to reach never holds its ~100 modules in memory.
import type * as Undici from 'undici'

let loaded: Promise<typeof Undici> | undefined

export const undici = (): Promise<typeof Undici> => (loaded ??= import('undici'))

export async function request(...args: Parameters<typeof Undici.request>): ReturnType<typeof Undici.request> {
  return (await undici()).request(...args)
}

/** undici's header and body timeouts, told apart by code so this module need not be loaded */
export function isUndiciTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT'
}

/**
 * the whole of `body` when it is at most `max` bytes; undefined when it is longer, the rest left
 * unread and the stream closed, so a foreign server cannot make this process buffer without bound
 */
export async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }, max: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.length
    if (size > max) {
      body.destroy()
      return undefined
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}
