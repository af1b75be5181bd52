// Client attestation at the space host: a space whose app access is an allow list admits an app
// only when it proves its client_id with a JWT signed by a key its client metadata document
// publishes (`jwks`, or a `jwks_uri` document), addressed to the authority's space host, short
// lived and single use. The apps' documents are served on loopback; any failure is 400
// InvalidClientAttestation and mints nothing.
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { OutboundGuard } from '../src/net/guard.js'
import { verifyClientAttestation } from '../src/space/attestation.js'
import { parseSpaceRef } from '../src/space/refs.js'
import { answerOf } from './space-helpers.js'
import { bearer, describe, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { newKey, proof } from './space-stand-in.js'

const TYPE = 'com.example.group'
const ALLOW_LIST = 'com.atproto.simplespace.defs#allowList'

type Signer = { priv: CryptoKey; jwk: JWK }
async function signer(kid: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true })
  return { priv: privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } }
}

let pds: TestPds
let apps: Server
let base: string
let alice: Awaited<ReturnType<typeof newAccount>>
let space: string
// what the loopback app server answers, by path, and how often each was asked
const docs: Record<string, unknown> = {}
const hits: Record<string, number> = {}
let inlineKey: Signer
let remoteKey: Signer
let liarKey: Signer

const clientId = (name: string) => `${base}/${name}/client-metadata.json`
const metadata = (name: string, extra: Record<string, unknown>) => ({
  client_id: clientId(name),
  client_name: name,
  redirect_uris: [`${base}/${name}/callback`],
  scope: 'atproto',
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'private_key_jwt',
  token_endpoint_auth_signing_alg: 'ES256',
  dpop_bound_access_tokens: true,
  ...extra,
})

/** an attestation of `client` signed with `key`; `over` replaces header fields and claims */
async function attestation(
  client: string,
  key: Signer,
  over: { header?: Record<string, unknown>; claims?: Record<string, unknown>; priv?: CryptoKey } = {},
) {
  const now = Math.floor(Date.now() / 1000)
  return new SignJWT({
    iss: client,
    sub: client,
    aud: `${alice.did}#atproto_space_host`,
    iat: now,
    exp: now + 60,
    jti: randomBytes(16).toString('hex'),
    ...over.claims,
  })
    .setProtectedHeader({ typ: 'atproto-client-attestation+jwt', alg: 'ES256', kid: key.jwk.kid, ...over.header })
    .sign(over.priv ?? key.priv)
}

/** the whole exchange an app makes: a fresh delegation token, a fresh DPoP key, the attestation */
async function exchange(clientAttestation?: string) {
  const { token } = (await pds.client().com.atproto.space.getDelegationToken({ space }, { headers: bearer(alice.accessJwt) })).data
  const url = `${pds.env.PDS_PUBLIC_URL}/xrpc/com.atproto.space.getSpaceCredential`
  return xrpc(pds.url, 'com.atproto.space.getSpaceCredential', {
    body: { space, ...(clientAttestation === undefined ? {} : { clientAttestation }) },
    headers: { authorization: `Bearer ${token}`, dpop: await proof(await newKey(), 'POST', url) },
  })
}

const refusal = (res: { status: number; body: { error?: string } }) => [res.status, res.body.error]

describe('client attestation at the space host', () => {
  beforeAll(async () => {
    apps = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname
      hits[path] = (hits[path] ?? 0) + 1
      const doc = docs[path]
      if (doc === undefined) return res.writeHead(404).end()
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc))
    })
    await new Promise<void>((r) => apps.listen(0, '127.0.0.1', r))
    base = `http://127.0.0.1:${(apps.address() as AddressInfo).port}`
    inlineKey = await signer('inline-1')
    remoteKey = await signer('remote-1')
    liarKey = await signer('liar-1')
    docs['/inline/client-metadata.json'] = metadata('inline', { jwks: { keys: [inlineKey.jwk] } })
    docs['/remote/client-metadata.json'] = metadata('remote', { jwks_uri: `${base}/remote/jwks.json` })
    // entries that are no keys are skipped, not fatal
    docs['/remote/jwks.json'] = { keys: [null, 7, 'key', remoteKey.jwk] }
    // a document that names another client_id than its own address
    docs['/liar/client-metadata.json'] = { ...metadata('liar', { jwks: { keys: [liarKey.jwk] } }), client_id: clientId('inline') }

    pds = await startTestPds()
    alice = await newAccount(pds.url, 'attest')
    space = (
      await pds.client().com.atproto.simplespace.createSpace(
        {
          type: TYPE,
          policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
          appAccess: { $type: ALLOW_LIST, allowed: [clientId('inline'), clientId('remote'), clientId('liar'), clientId('gone')] },
        },
        { headers: bearer(alice.accessJwt) },
      )
    ).data.uri
  }, 60_000)
  afterAll(async () => {
    await pds?.stop()
    await new Promise((r) => apps?.close(r))
  })

  it('mints a credential for an app attested with a key of its metadata’s jwks, and fetches the document once', async () => {
    const first = await exchange(await attestation(clientId('inline'), inlineKey))
    expect(first.status, first.text).toBe(200)
    const claims = JSON.parse(Buffer.from(first.body.credential.split('.')[1], 'base64url').toString())
    expect(claims).toMatchObject({ iss: alice.did, sub: space })
    const second = await exchange(await attestation(clientId('inline'), inlineKey))
    expect(second.status, second.text).toBe(200)
    expect(hits['/inline/client-metadata.json']).toBe(1)
  })

  it('mints a credential for an app whose keys are behind jwks_uri', async () => {
    const res = await exchange(await attestation(clientId('remote'), remoteKey))
    expect(res.status, res.text).toBe(200)
    expect(hits['/remote/jwks.json']).toBe(1)
  })

  it('refuses an app without an attestation, and an attested app the list does not name', async () => {
    expect(refusal(await exchange())).toEqual([400, 'AppNotAuthorized'])
    docs['/stranger/client-metadata.json'] = metadata('stranger', { jwks: { keys: [inlineKey.jwk] } })
    expect(refusal(await exchange(await attestation(clientId('stranger'), inlineKey)))).toEqual([400, 'AppNotAuthorized'])
  })

  it('refuses a bad signature, a wrong audience, an expired one, an unknown kid and a wrong typ', async () => {
    const id = clientId('inline')
    const other = await signer('inline-1')
    const now = Math.floor(Date.now() / 1000)
    const bad = {
      'a signature by a key the client does not publish': await attestation(id, inlineKey, { priv: other.priv }),
      'an audience of another authority': await attestation(id, inlineKey, { claims: { aud: 'did:plc:someoneelse#atproto_space_host' } }),
      'the bare authority DID as audience': await attestation(id, inlineKey, { claims: { aud: alice.did } }),
      'an expired one': await attestation(id, inlineKey, { claims: { iat: now - 600, exp: now - 60 } }),
      'an unknown kid': await attestation(id, inlineKey, { header: { kid: 'inline-2' } }),
      'no kid': await attestation(id, inlineKey, { header: { kid: undefined } }),
      'a wrong typ': await attestation(id, inlineKey, { header: { typ: 'JWT' } }),
      'sub not the client_id': await attestation(id, inlineKey, { claims: { sub: clientId('remote') } }),
      'a client_id that is no URL': await attestation('inline-app', inlineKey),
      'a key of another client': await attestation(clientId('remote'), inlineKey),
    }
    for (const [what, jwt] of Object.entries(bad)) {
      expect(refusal(await exchange(jwt)), what).toEqual([400, 'InvalidClientAttestation'])
    }
    expect(refusal(await exchange('not.a.jwt'))).toEqual([400, 'InvalidClientAttestation'])
  })

  it('refuses an attestation used twice', async () => {
    const once = await attestation(clientId('inline'), inlineKey)
    expect((await exchange(once)).status).toBe(200)
    expect(refusal(await exchange(once))).toEqual([400, 'InvalidClientAttestation'])
  })

  it('refuses a document that names another client_id, and one that cannot be fetched', async () => {
    expect(refusal(await exchange(await attestation(clientId('liar'), liarKey)))).toEqual([400, 'InvalidClientAttestation'])
    expect(refusal(await exchange(await attestation(clientId('gone'), inlineKey)))).toEqual([400, 'InvalidClientAttestation'])
  })

  it('outside development mode, a client_id on a private address is never fetched', async () => {
    const guard = new OutboundGuard({ devMode: false, nameservers: [] })
    docs['/private/client-metadata.json'] = metadata('private', { jwks: { keys: [inlineKey.jwk] } })
    try {
      for (const id of [clientId('private'), clientId('private').replace('http:', 'https:')]) {
        const jwt = await attestation(id, inlineKey)
        const deps = { outbound: guard, oauth: pds.services.oauth }
        expect(await answerOf(() => verifyClientAttestation(deps, jwt, parseSpaceRef(space)))).toEqual({
          status: 400,
          error: 'InvalidClientAttestation',
        })
      }
      expect(hits['/private/client-metadata.json']).toBeUndefined()
    } finally {
      await guard.close()
    }
  })
})
