import { createHash } from 'node:crypto'
import { AtpAgent } from '@atproto/api'
import { verifySignature } from '@atproto/crypto'
import * as dagCbor from '@ipld/dag-cbor'
import { base32 } from 'multiformats/bases/base32'
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, JWT_SECRET, startTestPds, xrpc, newAccount as createAccount, PASSWORD, type TestPds } from './harness.js'

let pds: TestPds

const newAccount = (extra: Record<string, unknown> = {}) => createAccount(pds.url, 'user', extra)

const auth = (token: string, scheme = 'Bearer') => ({ authorization: `${scheme} ${token}` })
const setStatus = (did: string, status: 'active' | 'deactivated' | 'takendown' | 'deleted') =>
  pds.services.db.updateTable('account').set({ status }).where('did', '=', did).execute()

async function forge(claims: Record<string, unknown>, header: Record<string, unknown> = {}, secret = JWT_SECRET) {
  const now = Math.floor(Date.now() / 1000)
  return new SignJWT({ scope: 'com.atproto.access', ...claims })
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', ...header })
    .setIssuer('did:web:localhost')
    .setAudience('did:web:localhost')
    .setIssuedAt((claims.iat as number) ?? now)
    .setExpirationTime((claims.exp as number) ?? now + 600)
    .setJti('forged-' + Math.random())
    .sign(new TextEncoder().encode(secret))
}

describe('accounts and password sessions', () => {
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  describe('createAccount', () => {
    it('creates an active account with a did:plc derived from its signed genesis operation', async () => {
      const acct = await newAccount()
      expect(acct.did).toMatch(/^did:plc:[a-z2-7]{24}$/)
      expect(acct.handle).toMatch(/^user\d+x\.test$/)
      const row = await pds.services.db.selectFrom('plc_operation').selectAll().where('did', '=', acct.did).execute()
      expect(row.map((r) => r.seq)).toEqual([0])
      const op = JSON.parse(row[0].operation)
      const hash = createHash('sha256').update(dagCbor.encode(op)).digest()
      expect('did:plc:' + base32.baseEncode(hash).slice(0, 24)).toBe(acct.did)
      expect(op.prev).toBeNull()
      expect(op.alsoKnownAs).toEqual([`at://${acct.handle}`])
      expect(op.services.atproto_pds).toEqual({ type: 'AtprotoPersonalDataServer', endpoint: pds.env.PDS_PUBLIC_URL })
      const { sig, ...unsigned } = op
      const rotation = pds.services.rotationKey.did()
      expect(op.rotationKeys).toEqual([rotation])
      expect(await verifySignature(rotation, dagCbor.encode(unsigned), Buffer.from(sig, 'base64url'))).toBe(true)
      const status = await pds.services.db.selectFrom('account').select('status').where('did', '=', acct.did).executeTakeFirst()
      expect(status?.status).toBe('active')
    })

    it('returns a DID document rendered from the latest operation', async () => {
      const acct = await newAccount()
      expect(acct.didDoc.id).toBe(acct.did)
      expect(acct.didDoc.alsoKnownAs).toEqual([`at://${acct.handle}`])
      expect(acct.didDoc.verificationMethod[0]).toMatchObject({ id: `${acct.did}#atproto`, type: 'Multikey', controller: acct.did })
      const key = await pds.services.db.selectFrom('signing_key').selectAll().where('did', '=', acct.did).executeTakeFirstOrThrow()
      expect(acct.didDoc.verificationMethod[0].publicKeyMultibase).toBe(key.public_key_multibase)
      expect(acct.didDoc.service).toEqual([
        { id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: pds.env.PDS_PUBLIC_URL },
      ])
    })

    it('serves the DID document of the newest operation in getSession and refreshSession after a handle update', async () => {
      const acct = await newAccount()
      const before = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(acct.accessJwt) })
      expect(before.body.didDoc.alsoKnownAs).toEqual([`at://${acct.handle}`])
      const handle = `renamed${acct.handle}`
      const upd = await xrpc(pds.url, 'com.atproto.identity.updateHandle', { headers: auth(acct.accessJwt), body: { handle } })
      expect(upd.status, JSON.stringify(upd.body)).toBe(200)
      const after = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(acct.accessJwt) })
      expect([after.body.handle, after.body.didDoc.alsoKnownAs]).toEqual([handle, [`at://${handle}`]])
      const refreshed = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(acct.refreshJwt) })
      expect(refreshed.body.didDoc.alsoKnownAs).toEqual([`at://${handle}`])
    })

    it("puts the caller's recoveryKey first among the rotation keys", async () => {
      const { Secp256k1Keypair } = await import('@atproto/crypto')
      const recovery = (await Secp256k1Keypair.create()).did()
      const acct = await newAccount({ recoveryKey: recovery })
      const row = await pds.services.db
        .selectFrom('plc_operation')
        .select('operation')
        .where('did', '=', acct.did)
        .executeTakeFirstOrThrow()
      expect(JSON.parse(row.operation).rotationKeys).toEqual([recovery, pds.services.rotationKey.did()])
    })

    const refused: [string, Record<string, unknown>, string][] = [
      ["a handle the lexicon's format refuses", { handle: 'bad_handle!.test' }, 'InvalidRequest'],
      ['a too-long handle', { handle: 'abcdefghijklmnopqrstuvwxyz.test' }, 'InvalidHandle'],
      ['a handle outside the service domains', { handle: 'someone.example.com' }, 'UnsupportedDomain'],
      ['a handle with a dotted prefix', { handle: 'a.b.test' }, 'InvalidHandle'],
      ['a too-short handle', { handle: 'ab.test' }, 'InvalidHandle'],
      ['an invalid email', { email: 'not-an-email' }, 'InvalidRequest'],
      ['a missing password', { password: undefined }, 'InvalidPassword'],
      ['a password over 256 characters', { password: 'x'.repeat(257) }, 'InvalidPassword'],
      ['a recoveryKey that is not a did:key', { recoveryKey: 'abc' }, 'InvalidRequest'],
    ]
    for (const [what, patch, error] of refused) {
      it(`refuses ${what} with ${error}`, async () => {
        const body = { handle: 'fresh1.test', email: 'fresh1@example.com', password: PASSWORD, ...patch }
        const res = await xrpc(pds.url, 'com.atproto.server.createAccount', { body })
        expect(res.status).toBe(400)
        expect(res.body.error).toBe(error)
      })
    }

    it('refuses a taken handle (in any case) with HandleNotAvailable and a taken email with EmailNotAvailable', async () => {
      const acct = await newAccount()
      const byHandle = await xrpc(pds.url, 'com.atproto.server.createAccount', {
        body: { handle: acct.handle.toUpperCase(), email: 'other1@example.com', password: PASSWORD },
      })
      expect(byHandle.status).toBe(400)
      expect(byHandle.body.error).toBe('HandleNotAvailable')
      const byEmail = await xrpc(pds.url, 'com.atproto.server.createAccount', {
        body: { handle: 'other1.test', email: acct.email.toUpperCase(), password: PASSWORD },
      })
      expect(byEmail.status).toBe(400)
      expect(byEmail.body.error).toBe('EmailNotAvailable')
    })

    it('lets exactly one of two racing sign-ups for one handle win', async () => {
      const results = await Promise.all(
        [1, 2, 3].map((i) =>
          xrpc(pds.url, 'com.atproto.server.createAccount', {
            body: { handle: 'racer.test', email: `racer${i}@example.com`, password: PASSWORD },
          }),
        ),
      )
      expect(results.filter((r) => r.status === 200)).toHaveLength(1)
      for (const r of results.filter((r) => r.status !== 200)) expect(r.body.error).toBe('HandleNotAvailable')
      const rows = await pds.services.db.selectFrom('account').select('did').where('handle', '=', 'racer.test').execute()
      expect(rows).toHaveLength(1)
    })

    it('refuses sign-up with InvalidInviteCode when invites are required', async () => {
      const gated = await startTestPds({ PDS_INVITE_REQUIRED: 'true' })
      try {
        const res = await xrpc(gated.url, 'com.atproto.server.createAccount', {
          body: { handle: 'invited.test', email: 'invited@example.com', password: PASSWORD, inviteCode: 'nope' },
        })
        expect(res.status).toBe(400)
        expect(res.body.error).toBe('InvalidInviteCode')
      } finally {
        await gated.stop()
      }
    })
  })

  describe('tokens', () => {
    it('issues an HS256 pair: a 2-hour access token and a 60-day refresh token', async () => {
      const acct = await newAccount()
      const ah = decodeProtectedHeader(acct.accessJwt)
      const rh = decodeProtectedHeader(acct.refreshJwt)
      expect(ah).toEqual({ alg: 'HS256', typ: 'at+jwt' })
      expect(rh).toEqual({ alg: 'HS256', typ: 'refresh+jwt' })
      const a = decodeJwt(acct.accessJwt)
      const r = decodeJwt(acct.refreshJwt)
      for (const c of [a, r]) {
        expect(c.iss).toBe('did:web:localhost')
        expect(c.aud).toBe('did:web:localhost')
        expect(c.sub).toBe(acct.did)
        expect(typeof c.jti).toBe('string')
      }
      expect(a.scope).toBe('com.atproto.access')
      expect(r.scope).toBe('com.atproto.refresh')
      expect(a.exp! - a.iat!).toBe(2 * 60 * 60)
      expect(r.exp! - r.iat!).toBe(60 * 24 * 60 * 60)
      expect(a.jti).not.toBe(r.jti)
      const rec = await pds.services.db.selectFrom('refresh_token').selectAll().where('jti', '=', r.jti!).executeTakeFirstOrThrow()
      expect(rec).toMatchObject({ did: acct.did, kind: 'session', app_password_name: null, dpop_jkt: null, scope: null })
      expect(Date.parse(rec.expires_at) / 1000).toBe(r.exp)
    })
  })

  describe('createSession', () => {
    it('logs in by handle, email or DID with the lexicon response shape', async () => {
      const acct = await newAccount()
      for (const identifier of [acct.handle, acct.email, acct.did, acct.handle.toUpperCase()]) {
        const res = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password: PASSWORD } })
        expect(res.status).toBe(200)
        expect(res.body).toMatchObject({
          did: acct.did,
          handle: acct.handle,
          email: acct.email,
          emailConfirmed: false,
          active: true,
        })
        expect(res.body.didDoc.id).toBe(acct.did)
        expect(res.body.status).toBeUndefined()
        expect(typeof res.body.accessJwt).toBe('string')
      }
    })

    it('answers an unknown identifier and a wrong password with the same 401 AuthenticationRequired', async () => {
      const acct = await newAccount()
      const wrong = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: 'nope' } })
      const unknown = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: 'ghost.test', password: 'nope' } })
      expect(wrong.status).toBe(401)
      expect(unknown.status).toBe(401)
      expect(wrong.body).toEqual(unknown.body)
      expect(wrong.body.error).toBe('AuthenticationRequired')
    })

    it('refuses a password over 256 characters without hashing it', async () => {
      const acct = await newAccount()
      const res = await xrpc(pds.url, 'com.atproto.server.createSession', {
        body: { identifier: acct.handle, password: 'x'.repeat(257) },
      })
      expect(res.status).toBe(401)
      expect(res.body.error).toBe('AuthenticationRequired')
    })

    it('lets a deactivated account log in, refuses takendown with AccountTakedown and deleted like an unknown one', async () => {
      const acct = await newAccount()
      const login = () => xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: PASSWORD } })
      await setStatus(acct.did, 'deactivated')
      const deactivated = await login()
      expect(deactivated.status).toBe(200)
      expect(deactivated.body).toMatchObject({ active: false, status: 'deactivated' })
      await setStatus(acct.did, 'takendown')
      const takendown = await login()
      expect(takendown.status).toBe(401)
      expect(takendown.body.error).toBe('AccountTakedown')
      await setStatus(acct.did, 'deleted')
      const deleted = await login()
      expect(deleted.status).toBe(401)
      expect(deleted.body.error).toBe('AuthenticationRequired')
    })
  })

  describe('refreshSession and deleteSession', () => {
    it('rotates: the new pair works, the presented refresh token is ExpiredToken afterwards', async () => {
      const acct = await newAccount()
      const first = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(acct.refreshJwt) })
      expect(first.status).toBe(200)
      expect(first.body).toMatchObject({ did: acct.did, handle: acct.handle, active: true })
      expect(first.body.refreshJwt).not.toBe(acct.refreshJwt)
      const again = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(acct.refreshJwt) })
      expect(again.status).toBe(401)
      expect(again.body.error).toBe('ExpiredToken')
      const logout = await xrpc(pds.url, 'com.atproto.server.deleteSession', { method: 'POST', headers: auth(acct.refreshJwt) })
      expect(logout.status).toBe(401)
      expect(logout.body.error).toBe('ExpiredToken')
      const who = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(first.body.accessJwt) })
      expect(who.status).toBe(200)
    })

    it('lets exactly one of ten concurrent refreshes of one token succeed', async () => {
      const acct = await newAccount()
      const results = await Promise.all(
        Array.from({ length: 10 }, () =>
          xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(acct.refreshJwt) }),
        ),
      )
      expect(results.filter((r) => r.status === 200)).toHaveLength(1)
      for (const r of results.filter((r) => r.status !== 200)) {
        expect(r.status).toBe(401)
        expect(r.body.error).toBe('ExpiredToken')
      }
      const records = await pds.services.db.selectFrom('refresh_token').select('jti').where('did', '=', acct.did).execute()
      expect(records).toHaveLength(1)
    })

    it('logs out: the refresh token stops working, the access token keeps working until it expires', async () => {
      const acct = await newAccount()
      const out = await xrpc(pds.url, 'com.atproto.server.deleteSession', { method: 'POST', headers: auth(acct.refreshJwt) })
      expect(out.status).toBe(200)
      const refresh = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(acct.refreshJwt) })
      expect(refresh.body.error).toBe('ExpiredToken')
      const who = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(acct.accessJwt) })
      expect(who.status).toBe(200)
    })
  })

  describe('the access, refresh and account-status checks', () => {
    let acct: Awaited<ReturnType<typeof newAccount>>
    beforeAll(async () => {
      acct = await newAccount()
    })
    const getSession = (headers: Record<string, string>) => xrpc(pds.url, 'com.atproto.server.getSession', { headers })
    const refresh = (headers: Record<string, string>) => xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers })

    it('reports every session field at getSession', async () => {
      const res = await getSession(auth(acct.accessJwt))
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ did: acct.did, handle: acct.handle, emailConfirmed: false, active: true })
      expect(res.body.email).toMatch(/^user\d+@example\.com$/)
      expect(res.body.didDoc.id).toBe(acct.did)
    })

    it('compares the Bearer scheme case-insensitively', async () => {
      expect((await getSession(auth(acct.accessJwt, 'bEaReR'))).status).toBe(200)
    })

    const cases: [string, () => Promise<Record<string, string>>, number, string][] = [
      ['no Authorization header', async () => ({}), 401, 'AuthMissing'],
      ['a Basic scheme', async () => auth('YWRtaW46eA==', 'Basic'), 401, 'InvalidToken'],
      ['a malformed token', async () => auth('not.a.jwt'), 401, 'InvalidToken'],
      ['an expired token', async () => auth(await forge({ sub: acct.did, iat: 1000, exp: 2000 })), 401, 'ExpiredToken'],
      ['a bad signature', async () => auth(await forge({ sub: acct.did }, {}, 'some-other-secret-entirely')), 401, 'InvalidToken'],
      ['a wrong scope', async () => auth(await forge({ sub: acct.did, scope: 'com.atproto.refresh' })), 401, 'InvalidToken'],
      ['a wrong typ', async () => auth(await forge({ sub: acct.did }, { typ: 'refresh+jwt' })), 401, 'InvalidToken'],
      ['an unknown subject', async () => auth(await forge({ sub: 'did:plc:unknownunknownunknown00' })), 401, 'InvalidToken'],
      ['a refresh token', async () => auth(acct.refreshJwt), 401, 'InvalidToken'],
    ]
    for (const [what, headers, status, error] of cases) {
      it(`answers ${what} at an access-token method with ${error}`, async () => {
        const res = await getSession(await headers())
        expect(res.status).toBe(status)
        expect(res.body.error).toBe(error)
      })
    }

    it('refuses an access token at refreshSession with InvalidToken, and no header with AuthMissing', async () => {
      const res = await refresh(auth(acct.accessJwt))
      expect(res.status).toBe(401)
      expect(res.body.error).toBe('InvalidToken')
      const none = await refresh({})
      expect(none.body.error).toBe('AuthMissing')
    })

    it('gates by status with the right 403 names', async () => {
      const other = await newAccount()
      const expectGate = async (status: 'deactivated' | 'takendown' | 'deleted', error: string) => {
        await setStatus(other.did, status)
        const res = await getSession(auth(other.accessJwt))
        expect(res.status).toBe(403)
        expect(res.body.error).toBe(error)
        const r = await refresh(auth(other.refreshJwt))
        expect(r.status).toBe(403)
        expect(r.body.error).toBe(error)
      }
      await expectGate('deactivated', 'AccountDeactivated')
      await expectGate('takendown', 'AccountTakedown')
      await expectGate('deleted', 'AccountDeleted')
      await setStatus(other.did, 'active')
      expect((await getSession(auth(other.accessJwt))).status).toBe(200)
    })
  })

  describe('request bodies', () => {
    it('answers malformed JSON with 400 InvalidRequest', async () => {
      const res = await xrpc(pds.url, 'com.atproto.server.createSession', { body: '{"identifier": ' })
      expect(res.status).toBe(400)
      expect(res.body.error).toBe('InvalidRequest')
    })

    it('answers a body that misses required fields with 400 InvalidRequest', async () => {
      const res = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: 'x' } })
      expect(res.status).toBe(400)
      expect(res.body.error).toBe('InvalidRequest')
    })

    it('answers a body over the limit with 413', async () => {
      const res = await xrpc(pds.url, 'com.atproto.server.createSession', {
        body: { identifier: 'x', password: 'y'.repeat(2 * 1024 * 1024) },
      })
      expect(res.status).toBe(413)
    })
  })

  describe('official clients', () => {
    it('completes create, login, refresh and logout through AtpAgent', async () => {
      const agent = new AtpAgent({ service: pds.url })
      await agent.createAccount({ handle: 'agent.test', email: 'agent@example.com', password: PASSWORD })
      expect(agent.session?.handle).toBe('agent.test')
      const login = new AtpAgent({ service: pds.url })
      await login.login({ identifier: 'agent.test', password: PASSWORD })
      const did = login.session!.did
      const { data } = await login.com.atproto.server.getSession()
      expect(data).toMatchObject({ did, handle: 'agent.test', email: 'agent@example.com', active: true })
      const before = login.session!.refreshJwt
      await login.sessionManager.refreshSession()
      expect(login.session!.refreshJwt).not.toBe(before)
      expect((await login.com.atproto.server.getSession()).data.did).toBe(did)
      const refreshJwt = login.session!.refreshJwt
      await login.logout()
      expect(login.session).toBeUndefined()
      const res = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(refreshJwt) })
      expect(res.body.error).toBe('ExpiredToken')
    })

    it('completes the same cycle through the generated client', async () => {
      const client = pds.client()
      const created = await client.com.atproto.server.createAccount({ handle: 'gen.test', email: 'gen@example.com', password: PASSWORD })
      const { data: s } = await client.com.atproto.server.createSession({ identifier: 'gen@example.com', password: PASSWORD })
      expect(s.did).toBe(created.data.did)
      const who = await client.com.atproto.server.getSession(undefined, { headers: auth(s.accessJwt) })
      expect(who.data.handle).toBe('gen.test')
      const { data: r } = await client.com.atproto.server.refreshSession(undefined, { headers: auth(s.refreshJwt) })
      await client.com.atproto.server.deleteSession(undefined, { headers: auth(r.refreshJwt) })
      await expect(client.com.atproto.server.refreshSession(undefined, { headers: auth(r.refreshJwt) })).rejects.toMatchObject({
        error: 'ExpiredToken',
      })
    })
  })
})
