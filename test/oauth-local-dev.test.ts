// Developing an app against `make serve`: the server keeps its accounts' DIDs in its own PLC log,
// so it answers the PLC directory's reads for them itself. The official OAuth clients, given only
// their documented options (the server as PLC directory and as XRPC handle resolver, plain http
// allowed), sign in against a server started as `make serve` starts it, in Node and in headless
// Chromium. The reads answer as a real directory (@did-plc/server) fed the same operations does;
// with a directory configured they do not exist.
import { spawn, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import { rmSync } from 'node:fs'
import { requestLocalLock } from '@atproto/oauth-client'
import { NodeOAuthClient, type NodeSavedSession, type NodeSavedState } from '@atproto/oauth-client-node'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { BrowserRig, hasChromium, signInThroughPages, waitFor } from './browser-helpers.js'
import { dialect, describe, freePort, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'
import { openPage, signInAndAllow } from './oauth-helpers.js'

const BIN = new URL('../dist/bin.js', import.meta.url).pathname
const PASSWORD = 'local development password'
const SCOPE = 'atproto transition:generic'
// `make serve` is SQLite under ./data: the process runs once, on the sqlite project
const makeServe = dialect === 'sqlite' ? describe : describe.skip
// CommonJS, loaded as Node loads it
const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')

/** `node dist/bin.js` as `make serve` runs it, in a fresh directory, on a free loopback port */
async function startMakeServe() {
  const dir = tempDir('pds-make-serve-')
  const port = await freePort()
  const child: ChildProcess = spawn(process.execPath, [BIN], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', PDS_PORT: String(port), PDS_BIND: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const keep = (c: Buffer) => (output = (output + c).slice(-4000))
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
  const url = `http://localhost:${port}`
  const started = Date.now()
  for (;;) {
    const health = await fetch(`${url}/xrpc/_health`).catch(() => undefined)
    if (health?.ok) {
      expect(await health.json()).toMatchObject({ plc: 'local' })
      break
    }
    if (child.exitCode !== null || Date.now() - started > 30_000) {
      child.kill('SIGKILL')
      throw new Error(`make serve's server did not come up: ${output}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM')
      const killed = setTimeout(() => child.kill('SIGKILL'), 6000)
      await exited
      clearTimeout(killed)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

async function createAccount(url: string, handle: string) {
  const res = await xrpc(url, 'com.atproto.server.createAccount', {
    body: { handle, email: `${handle.split('.')[0]}@example.com`, password: PASSWORD },
  })
  expect(res.status, res.text).toBe(200)
  return res.body.did as string
}

function memoryStore<T>() {
  const m = new Map<string, T>()
  return {
    get: async (k: string) => m.get(k),
    set: async (k: string, v: T) => void m.set(k, v),
    del: async (k: string) => void m.delete(k),
  }
}

makeServe('an app signing in against make serve', () => {
  let server: Awaited<ReturnType<typeof startMakeServe>>
  const rig = new BrowserRig()
  beforeAll(async () => {
    server = await startMakeServe()
    if (hasChromium) await rig.start()
  }, 60_000)
  afterAll(async () => {
    if (hasChromium) await rig.stop()
    await server?.stop()
  })

  it('signs in with @atproto/oauth-client-node given the server as PLC directory and handle resolver', async () => {
    const did = await createAccount(server.url, 'alice.test')
    const redirect = 'http://127.0.0.1:9/callback'
    const client = new NodeOAuthClient({
      clientMetadata: {
        client_id: `http://localhost?${new URLSearchParams({ redirect_uri: redirect, scope: SCOPE })}`,
        redirect_uris: [redirect],
        scope: SCOPE,
        response_types: ['code'],
        grant_types: ['authorization_code', 'refresh_token'],
        token_endpoint_auth_method: 'none',
        application_type: 'native',
        dpop_bound_access_tokens: true,
      },
      stateStore: memoryStore<NodeSavedState>(),
      sessionStore: memoryStore<NodeSavedSession>(),
      // exactly the options the docs give an app developer
      plcDirectoryUrl: server.url,
      handleResolver: server.url,
      allowHttp: true,
      requestLock: requestLocalLock,
    })

    const authUrl = await client.authorize('alice.test', { scope: SCOPE })
    expect(authUrl.href.startsWith(`${server.url}/oauth/authorize?`)).toBe(true)
    const requestUri = authUrl.searchParams.get('request_uri')!
    const page = await openPage(server.url, requestUri)
    expect(page.status).toBe(200)
    expect(page.html).toContain('value="alice.test"')
    const allowed = await signInAndAllow(server.url, requestUri, { handle: 'alice.test', password: PASSWORD }, page)
    expect(allowed.status, allowed.text).toBe(302)
    const callback = new URL(allowed.headers.get('location')!)
    expect(callback.origin + callback.pathname).toBe(redirect)

    const { session } = await client.callback(callback.searchParams)
    expect(session.did).toBe(did)
    const me = await session.fetchHandler('/xrpc/com.atproto.server.getSession')
    expect(me.status).toBe(200)
    expect(await me.json()).toMatchObject({ did, handle: 'alice.test' })
    const prefs = await session.fetchHandler('/xrpc/app.bsky.actor.getPreferences')
    expect(prefs.status).toBe(200)
    expect(await prefs.json()).toEqual({ preferences: [] })

    // starting from the DID instead of the handle resolves it through the same reads
    const byDid = await client.authorize(did, { scope: SCOPE })
    expect(byDid.href.startsWith(`${server.url}/oauth/authorize?`)).toBe(true)
  }, 60_000)

  it.skipIf(!hasChromium)(
    'signs in with @atproto/oauth-client-browser in headless Chromium with the same options',
    async () => {
      const did = await createAccount(server.url, 'bob.test')
      const bundle = await rig.bundle(
        'local-dev-app',
        `
import { BrowserOAuthClient } from '@atproto/oauth-client-browser'
const cfg = window.CONFIG
const main = async () => {
  const client = await BrowserOAuthClient.load({
    clientId: cfg.clientId,
    plcDirectoryUrl: cfg.pds,
    handleResolver: cfg.pds,
    allowHttp: true,
    responseMode: 'query',
  })
  window.signIn = (handle) => client.signIn(handle, { scope: cfg.scope }).catch((err) => { window.signInError = String(err) })
  const result = await client.init()
  if (!result) return { state: 'signed-out' }
  const me = await result.session.fetchHandler('/xrpc/com.atproto.server.getSession')
  const prefs = await result.session.fetchHandler('/xrpc/app.bsky.actor.getPreferences')
  return { state: 'signed-in', did: result.session.did, me: await me.json(), prefs: prefs.status }
}
window.result = main().catch((err) => ({ state: 'error', message: String(err && err.stack || err) }))
`,
      )
      const app = await rig.serveApp(bundle, (origin) => ({
        pds: server.url,
        scope: SCOPE,
        clientId: `http://localhost?${new URLSearchParams({ redirect_uri: `${origin}/`, scope: SCOPE })}`,
      }))
      const page = await rig.browser.newPage()
      try {
        await page.goto(app.origin + '/', { timeout: 10_000 })
        expect(await waitFor<any>(page, 'window.result', 20_000)).toEqual({ state: 'signed-out' })
        await signInThroughPages(page, {
          pds: { env: { PDS_PUBLIC_URL: server.url } },
          appOrigin: app.origin,
          handle: 'bob.test',
          password: PASSWORD,
        })
        const result = await waitFor<any>(page, 'window.result', 30_000)
        expect(result.state, result.message).toBe('signed-in')
        expect(result.did).toBe(did)
        expect(result.me).toMatchObject({ did, handle: 'bob.test' })
        expect(result.prefs).toBe(200)
      } finally {
        await page.close()
      }
    },
    90_000,
  )
})

describe('PLC directory reads from the local log', () => {
  let pds: TestPds
  let plc: any
  let plcUrl: string
  beforeAll(async () => {
    pds = await startTestPds()
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
  })
  afterAll(async () => {
    await pds?.stop()
    await plc?.destroy()
  })

  it('answers /<did>, /data, /log, /log/audit and /log/last as a PLC directory holding the same operations', async () => {
    const did = await createAccount(pds.url, 'carol.test')
    const login = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
    const moved = await xrpc(pds.url, 'com.atproto.identity.updateHandle', {
      body: { handle: 'carol2.test' },
      headers: { authorization: `Bearer ${login.body.accessJwt}` },
    })
    expect(moved.status).toBe(200)

    // the log, handed to a real directory operation by operation (it checks every signature and prev)
    const log = await fetch(`${pds.url}/${encodeURIComponent(did)}/log`)
    expect(log.status).toBe(200)
    const ops = (await log.json()) as any[]
    expect(ops).toHaveLength(2)
    for (const op of ops) {
      const res = await fetch(`${plcUrl}/${did}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(op),
      })
      expect(res.status, await res.text()).toBe(200)
    }

    const read = async (base: string, path: string) => {
      const res = await fetch(`${base}/${encodeURIComponent(did)}${path}`)
      return {
        status: res.status,
        type: res.headers.get('content-type'),
        cors: res.headers.get('access-control-allow-origin'),
        body: (await res.json()) as any,
      }
    }
    for (const path of ['/data', '/log', '/log/last']) {
      const [ours, theirs] = [await read(pds.url, path), await read(plcUrl, path)]
      expect(ours.status, path).toBe(200)
      expect(ours.body, path).toEqual(theirs.body)
      expect(ours.cors).toBe('*')
    }
    const [audit, theirAudit] = [await read(pds.url, '/log/audit'), await read(plcUrl, '/log/audit')]
    const undated = (entries: any[]) => entries.map(({ createdAt, ...rest }) => ({ ...rest, dated: !Number.isNaN(Date.parse(createdAt)) }))
    expect(undated(audit.body)).toEqual(undated(theirAudit.body))

    // the document: the same keys, handle and PDS, in the current plc.directory's rendering
    const doc = await read(pds.url, '')
    expect(doc.status).toBe(200)
    expect(doc.type).toMatch(/^application\/did\+ld\+json/)
    expect(doc.body).toMatchObject({
      id: did,
      alsoKnownAs: ['at://carol2.test'],
      verificationMethod: [{ id: `${did}#atproto`, type: 'Multikey', controller: did }],
      service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: pds.env.PDS_PUBLIC_URL }],
    })
    const data = (await read(plcUrl, '/data')).body
    expect('did:key:' + doc.body.verificationMethod[0].publicKeyMultibase).toBe(data.verificationMethods.atproto)

    // the unencoded spelling a person types works too
    const plain = await fetch(`${pds.url}/${did}/log/last`)
    expect(await plain.json()).toEqual(ops[1])
  })

  it("answers 404 with the directory's message for a DID not in the log", async () => {
    const unknown = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
    for (const path of ['', '/data', '/log', '/log/audit', '/log/last']) {
      const [ours, theirs] = await Promise.all([
        fetch(`${pds.url}/${encodeURIComponent(unknown)}${path}`),
        fetch(`${plcUrl}/${encodeURIComponent(unknown)}${path}`),
      ])
      expect([ours.status, await ours.json()], path).toEqual([theirs.status, await theirs.json()])
      expect(ours.status).toBe(404)
    }
    // anything else at the root stays the server's own 404
    const other = await fetch(`${pds.url}/did:web:example.com`)
    expect([other.status, ((await other.json()) as any).error]).toEqual([404, 'NotFound'])
  })
})

describe('PLC directory reads with a directory configured', () => {
  let pds: TestPds
  let plc: any
  let plcUrl: string
  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    // production: a public hostname, the directory named
    pds = await startTestPds({
      PDS_HOSTNAME: 'pds.example.com',
      PDS_PUBLIC_URL: 'https://pds.example.com',
      PDS_DID_PLC_URL: plcUrl,
      PDS_CRAWLERS: '',
    })
  })
  afterAll(async () => {
    await pds?.stop()
    await plc?.destroy()
  })

  it('leaves the reads to the directory: the server has no such routes', async () => {
    const did = await createAccount(pds.url, 'dave.test')
    expect((await fetch(`${plcUrl}/${did}`)).status).toBe(200)
    for (const path of ['', '/data', '/log', '/log/audit', '/log/last']) {
      const res = await fetch(`${pds.url}/${encodeURIComponent(did)}${path}`)
      expect([res.status, ((await res.json()) as any).error], path).toEqual([404, 'NotFound'])
      expect(res.headers.get('access-control-allow-origin')).toBeNull()
    }
  })
})
