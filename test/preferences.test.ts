import { SignJWT } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, JWT_SECRET, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'

let pds: TestPds

const account = () => newAccount(pds.url, 'pref')

const get = (token: string) => xrpc(pds.url, 'app.bsky.actor.getPreferences', { headers: bearer(token) })
const put = (token: string, preferences: unknown) =>
  xrpc(pds.url, 'app.bsky.actor.putPreferences', { body: { preferences }, headers: bearer(token) })

// an access token as an app-password session carries it (the app-password flow is another issue's)
function appPasswordToken(did: string, privileged = false) {
  const now = Math.floor(Date.now() / 1000)
  return new SignJWT({ scope: 'com.atproto.access', app_password: { name: 'phone', privileged } })
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' })
    .setIssuer('did:web:localhost')
    .setAudience('did:web:localhost')
    .setSubject(did)
    .setIssuedAt(now)
    .setExpirationTime(now + 600)
    .setJti('app-' + Math.random())
    .sign(new TextEncoder().encode(JWT_SECRET))
}

const adult = { $type: 'app.bsky.actor.defs#adultContentPref', enabled: true }
const label = { $type: 'app.bsky.actor.defs#contentLabelPref', label: 'nsfw', visibility: 'warn' }
const birth = { $type: 'app.bsky.actor.defs#personalDetailsPref', birthDate: '1990-01-01T00:00:00.000Z' }

describe('preferences', () => {
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('starts empty and returns what was stored, in order', async () => {
    const a = await account()
    expect((await get(a.accessJwt)).body).toEqual({ preferences: [] })
    expect((await put(a.accessJwt, [label, adult])).status).toBe(200)
    expect((await get(a.accessJwt)).body).toEqual({ preferences: [label, adult] })
  })

  it('replaces the whole list on every put', async () => {
    const a = await account()
    await put(a.accessJwt, [label, adult])
    await put(a.accessJwt, [{ ...adult, enabled: false }])
    expect((await get(a.accessJwt)).body.preferences).toEqual([{ ...adult, enabled: false }])
  })

  it('keeps each account to its own preferences', async () => {
    const a = await account()
    const b = await account()
    await put(a.accessJwt, [adult])
    expect((await get(b.accessJwt)).body.preferences).toEqual([])
  })

  it('works through the generated client', async () => {
    const a = await account()
    const client = pds.client()
    client.setHeader('authorization', `Bearer ${a.accessJwt}`)
    await client.app.bsky.actor.putPreferences({ preferences: [adult] })
    const { data } = await client.app.bsky.actor.getPreferences()
    expect(data.preferences).toEqual([adult])
  })

  it('refuses preferences without a $type or outside app.bsky, storing nothing', async () => {
    const a = await account()
    await put(a.accessJwt, [adult])
    const untyped = await put(a.accessJwt, [label, { enabled: true }])
    expect(untyped.status).toBe(400)
    expect(untyped.body.error).toBe('InvalidRequest')
    const foreign = await put(a.accessJwt, [label, { $type: 'com.example.pref', x: 1 }])
    expect(foreign.status).toBe(400)
    expect(foreign.body.message).toMatch(/app\.bsky/)
    expect((await get(a.accessJwt)).body.preferences).toEqual([adult])
    const notList = await xrpc(pds.url, 'app.bsky.actor.putPreferences', { body: { preferences: 'x' }, headers: bearer(a.accessJwt) })
    expect(notList.status).toBe(400)
  })

  it('requires a signed-in caller', async () => {
    expect((await xrpc(pds.url, 'app.bsky.actor.getPreferences')).status).toBe(401)
    expect((await xrpc(pds.url, 'app.bsky.actor.putPreferences', { body: { preferences: [] } })).status).toBe(401)
  })

  it('keeps personal details from app-password sessions, on read and on write', async () => {
    const a = await account()
    await put(a.accessJwt, [birth, adult])
    const app = await appPasswordToken(a.did)
    expect((await get(app)).body.preferences).toEqual([adult])
    const refused = await put(app, [birth])
    expect(refused.status).toBe(400)
    // an app-password put replaces what it can see and leaves the birth date alone
    expect((await put(app, [label])).status).toBe(200)
    expect((await get(a.accessJwt)).body.preferences).toEqual([birth, label])
  })

  it('lets a deactivated account read and write them, as migration tools do', async () => {
    const a = await account()
    await pds.services.db.updateTable('account').set({ status: 'deactivated' }).where('did', '=', a.did).execute()
    expect((await put(a.accessJwt, [adult])).status).toBe(200)
    expect((await get(a.accessJwt)).body.preferences).toEqual([adult])
    await pds.services.db.updateTable('account').set({ status: 'takendown' }).where('did', '=', a.did).execute()
    expect((await get(a.accessJwt)).status).toBe(403)
  })
})
