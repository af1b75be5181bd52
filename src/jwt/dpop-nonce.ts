// Server-issued DPoP nonces (RFC 9449 §8), mandatory in the atproto OAuth profile. A nonce is
// the HMAC of a time window's number under a key derived from the JWT secret, so every process
// sharing that secret hands out and accepts the same nonces without talking to each other. The
// current window's nonce is given out; the previous and the next window's are accepted too, so a
// client holding a nonce across a rotation, or a process whose clock is slightly ahead or
// behind, is not turned away.
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto'

/** how often the nonce given out changes (the profile asks for at most five minutes) */
export const DPOP_NONCE_ROTATION_MS = 3 * 60_000

export class DpopNonces {
  private readonly key: Buffer
  private cached: { window: number; nonces: [string, string, string] } | undefined

  constructor(
    secret: string,
    private readonly rotationMs = DPOP_NONCE_ROTATION_MS,
    private readonly now: () => number = () => Date.now(),
  ) {
    // a key of its own: a nonce is public, and nothing else signed with the JWT secret looks like one
    this.key = Buffer.from(hkdfSync('sha256', secret, 'pds-dpop-nonce', 'dpop-nonce', 32))
  }

  /** the nonce to put in DPoP-Nonce now */
  current(): string {
    return this.around()[1]
  }

  /** whether a proof's `nonce` claim is the current window's, or the one before or after it */
  accepts(nonce: unknown): boolean {
    if (typeof nonce !== 'string' || nonce.length !== 22) return false
    const given = Buffer.from(nonce)
    return this.around().some((n) => timingSafeEqual(Buffer.from(n), given))
  }

  private around(): [string, string, string] {
    const window = Math.floor(this.now() / this.rotationMs)
    if (this.cached?.window !== window) {
      this.cached = { window, nonces: [this.of(window - 1), this.of(window), this.of(window + 1)] }
    }
    return this.cached.nonces
  }

  private of(window: number): string {
    return createHmac('sha256', this.key).update(String(window)).digest().subarray(0, 16).toString('base64url')
  }
}

const AS_ENDPOINTS = new Set(['/oauth/par', '/oauth/token'])

/**
 * DPoP-Nonce on every answer a DPoP client reads: PAR and the token endpoint always, and any
 * XRPC request that comes with a DPoP token or proof (errors and proxied calls included), so
 * clients learn the next nonce before theirs goes stale.
 */
export function dpopNonceHeader(nonces: DpopNonces) {
  return (
    req: { url: string; headers: Record<string, string | string[] | undefined> },
    res: { setHeader(name: string, value: string): unknown },
    next: () => void,
  ) => {
    const q = req.url.indexOf('?')
    const path = q === -1 ? req.url : req.url.slice(0, q)
    const auth = req.headers.authorization
    if (
      AS_ENDPOINTS.has(path) ||
      (path.startsWith('/xrpc/') && (req.headers.dpop !== undefined || (typeof auth === 'string' && /^dpop /i.test(auth))))
    ) {
      res.setHeader('DPoP-Nonce', nonces.current())
    }
    next()
  }
}
