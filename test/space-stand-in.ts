// What the Spaces suites share: DPoP keys and proofs for space credentials, and a stand-in
// syncer / managing app on loopback, a did:web whose document names it.
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose'

export type Key = { priv: CryptoKey; jwk: JWK }
export const newKey = async (): Promise<Key> => {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true })
  return { priv: privateKey, jwk: await exportJWK(publicKey) }
}
const sha256b64 = async (s: string) => Buffer.from(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s))).toString('base64url')

/** a DPoP proof for `method` at `url` (no query), with `ath` when a credential comes with it */
export async function proof(key: Key, method: string, url: string, opts: { credential?: string; iat?: number; jti?: string } = {}) {
  const payload: Record<string, unknown> = { htm: method, htu: url, jti: opts.jti ?? randomBytes(12).toString('hex') }
  if (opts.credential) payload.ath = await sha256b64(opts.credential)
  return new SignJWT(payload)
    .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk })
    .setIssuedAt(opts.iat ?? Math.floor(Date.now() / 1000))
    .sign(key.priv)
}

/** a stand-in syncer and managing app on loopback, a did:web whose document names it */
export async function startStandIn() {
  const received: { lxm: string; auth?: string; body: any }[] = []
  let authorized = new Set<string>()
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const url = new URL(req.url ?? '/', 'http://x')
    res.setHeader('content-type', 'application/json')
    if (url.pathname === '/.well-known/did.json') {
      return res.end(
        JSON.stringify({
          id: did,
          service: [
            { id: '#syncer', type: 'SpaceSyncer', serviceEndpoint: base },
            { id: '#app', type: 'ManagingApp', serviceEndpoint: base },
          ],
        }),
      )
    }
    const lxm = url.pathname.replace('/xrpc/', '')
    if (lxm === 'com.atproto.simplespace.checkUserAccess') {
      received.push({ lxm, auth: req.headers.authorization, body: Object.fromEntries(url.searchParams) })
      return res.end(JSON.stringify({ authorized: authorized.has(url.searchParams.get('user') ?? '') }))
    }
    received.push({ lxm, auth: req.headers.authorization, body: chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined })
    res.end('{}')
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as { port: number }).port
  const base = `http://localhost:${port}`
  const did = `did:web:localhost%3A${port}`
  return {
    did,
    received,
    authorize: (dids: string[]) => void (authorized = new Set(dids)),
    /** waits (bounded) for a call of `lxm` matching `pred` */
    async next(lxm: string, pred: (body: any) => boolean = () => true) {
      for (let i = 0; i < 100; i++) {
        const hit = received.find((r) => r.lxm === lxm && pred(r.body))
        if (hit) return hit
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error(`no ${lxm} arrived`)
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}
