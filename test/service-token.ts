// Service tokens as another service mints them, with every claim and header under the test's
// control, and a stand-in service on loopback that publishes a did:web document with its keys.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Keypair } from '@atproto/crypto'

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')

/** a signed JWT: `header` beyond alg/typ (e.g. kid) and `claims` exactly as given (iat, exp, jti
 *  filled in unless given) */
export async function serviceToken(keypair: Keypair, claims: Record<string, unknown>, header: Record<string, unknown> = {}) {
  const now = Math.floor(Date.now() / 1000)
  const payload = { iat: now, exp: now + 60, jti: Math.random().toString(36).slice(2), ...claims }
  const input = `${b64({ alg: keypair.jwtAlg, typ: 'JWT', ...header })}.${b64(payload)}`
  const sig = await keypair.sign(new TextEncoder().encode(input))
  return `${input}.${Buffer.from(sig).toString('base64url')}`
}

/** a service on loopback known by a did:web whose document lists `keys` (verification method id →
 *  keypair) and `services` (id → type); `handle` answers everything else */
export async function didWebService(
  keys: Record<string, Keypair>,
  services: Record<string, string> = {},
  handle?: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void,
) {
  let did = ''
  let url = ''
  const server: Server = createServer((req, res) => {
    if (req.url === '/.well-known/did.json') {
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end(
        JSON.stringify({
          '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/multikey/v1'],
          id: did,
          verificationMethod: Object.entries(keys).map(([id, k]) => ({
            id: `${did}#${id}`,
            type: 'Multikey',
            controller: did,
            publicKeyMultibase: k.did().slice('did:key:'.length),
          })),
          service: Object.entries(services).map(([id, type]) => ({ id: `#${id}`, type, serviceEndpoint: url })),
        }),
      )
    }
    if (handle) return handle(req, res)
    res.writeHead(404).end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  const port = (server.address() as AddressInfo).port
  did = `did:web:localhost%3A${port}`
  url = `http://localhost:${port}`
  return {
    did,
    url,
    stop: () => {
      server.closeAllConnections()
      return new Promise((r) => server.close(r))
    },
  }
}
