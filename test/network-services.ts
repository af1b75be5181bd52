// The network's real services for a test: a PLC directory (@did-plc/server, in this process), the
// Bluesky AppView (@atproto/bsky with its dataplane and firehose ingester) and the Ozone
// moderation service (@atproto/ozone), both from test/network/ (its own package.json, installed by
// `make test`) in a child process on loopback, on the tests' PostgreSQL in fresh schemas dropped
// at the end. Typical use:
//
//   const net = await startNetwork()                         // PLC + AppView (+ Ozone's identity)
//   const pds = await startTestPds(net.pdsEnv)               // our server, pointed at all three
//   const appview = await net.startAppView({ pds })          // the AppView follows its firehose
//   const ozone = await net.startOzone({ pds })              // optional
//   ... await appview.catchUp(pds) ...
//   await net.stop(); await pds.stop()
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import pg from 'pg'
import { describe as vdescribe } from 'vitest'
import { freePort, postgresUrl, type TestPds } from './harness.js'

const ROOT = new URL('../', import.meta.url).pathname
const NETWORK_DIR = join(ROOT, 'test', 'network')

/** the AppView and Ozone keep their data in PostgreSQL whatever our server's dialect: without
 *  PDS_TEST_POSTGRES_URL these suites report skipped */
export const describeNetwork: typeof vdescribe = postgresUrl ? vdescribe : (vdescribe.skip as typeof vdescribe)

export type Plc = { url: string; close(): Promise<void> }

/** a PLC directory on loopback that verifies every operation's signature and chain */
export async function startPlc(): Promise<Plc> {
  const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')
  const plc = PlcServer.create({ db: Database.mock(), port: 0 })
  const server = await plc.start()
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => plc.destroy() }
}

export type AppView = {
  url: string
  did: string
  /** the last firehose seq the AppView has indexed */
  cursor(): Promise<number>
  /** waits (bounded) until the AppView has indexed seq `seq` */
  waitForSeq(seq: number, ms?: number): Promise<void>
  /** waits (bounded) until the AppView has indexed everything `pds` has sequenced so far */
  catchUp(pds: TestPds, ms?: number): Promise<void>
  /** holds indexing back: events arrive and wait, the AppView's answers stay as they are */
  hold(): Promise<void>
  /** lets held events be indexed */
  release(): Promise<void>
}

export type Ozone = {
  url: string
  did: string
  /** adds `did` to Ozone's team (its service tokens are then accepted with that role) */
  addMember(did: string, role: 'admin' | 'moderator' | 'triage'): Promise<void>
  /** an Authorization header for Ozone, from its built-in admin, moderator or triage member */
  memberHeaders(lxm: string, role?: 'admin' | 'moderator' | 'triage'): Promise<{ authorization: string }>
  /** runs Ozone's queues now: moderation events are pushed to the PDS and the AppView */
  process(): Promise<void>
}

export type Network = {
  plcUrl: string
  appview: { url: string; did: string }
  ozone: { url: string; did: string }
  /** environment for our server: the PLC directory, the AppView and the moderation service */
  pdsEnv: Record<string, string>
  /** subscribes the AppView's ingester to `pds`'s firehose */
  startAppView(opts: { pds: TestPds }): Promise<AppView>
  /** starts Ozone, talking to `pds` and the AppView */
  startOzone(opts: { pds: TestPds }): Promise<Ozone>
  stop(): Promise<void>
}

export async function startNetwork(opts: { plc?: Plc } = {}): Promise<Network> {
  if (!postgresUrl) throw new Error('the AppView needs PostgreSQL: set PDS_TEST_POSTGRES_URL')
  if (!existsSync(join(NETWORK_DIR, 'node_modules', '@atproto', 'bsky'))) {
    throw new Error('the network services are not installed: run `make test` (or make .tools/stamps/network)')
  }
  const plc = opts.plc ?? (await startPlc())
  // the AppView takes schema names of letters and underscores only
  const suffix = [...randomBytes(10)].map((b) => String.fromCharCode(97 + (b % 26))).join('')
  const schemas = [`appview_${suffix}`, `ozone_${suffix}`]
  const [appviewPort, ozonePort, controlPort] = [await freePort(), await freePort(), await freePort()]
  const config = {
    plcUrl: plc.url,
    dbUrl: postgresUrl,
    appview: { port: appviewPort, schema: schemas[0], keyHex: randomBytes(32).toString('hex') },
    ozone: { port: ozonePort, schema: schemas[1], keyHex: randomBytes(32).toString('hex') },
    handleDomains: ['.test'],
    controlPort,
  }
  const child: ChildProcess = spawn(process.execPath, [join(NETWORK_DIR, 'server.mjs')], {
    cwd: NETWORK_DIR,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NETWORK_CONFIG: JSON.stringify(config), LOG_ENABLED: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  let buffered = ''
  const ready = new Promise<{ appview: { url: string; did: string }; ozone: { url: string; did: string } }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the AppView did not start in 90s: ${stderr.slice(-3000)}`)), 90_000)
    child.stdout!.on('data', (chunk) => {
      buffered += chunk
      const line = buffered.split('\n').find((l) => l.startsWith('READY '))
      if (line) {
        clearTimeout(timer)
        resolve(JSON.parse(line.slice(6)))
      }
    })
    child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-20_000)))
    child.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`the AppView exited (${code}): ${stderr.slice(-3000)}`))
    })
  })
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 6000)
      await exited
      clearTimeout(timer)
    }
    await dropSchemas(schemas)
    if (!opts.plc) await plc.close()
  }
  let started: Awaited<typeof ready>
  try {
    started = await ready
  } catch (err) {
    await stop()
    throw err
  }

  const controlUrl = `http://127.0.0.1:${controlPort}`
  const control = async (method: 'GET' | 'POST', path: string, body?: unknown): Promise<any> => {
    const res = await fetch(controlUrl + path, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    })
    const json = await res.json()
    if (res.status !== 200) throw new Error(`network control ${path}: ${res.status} ${JSON.stringify(json)}`)
    return json
  }

  const appview: AppView = {
    ...started.appview,
    cursor: async () => (await control('GET', '/cursor')).cursor ?? 0,
    async waitForSeq(seq, ms = 20_000) {
      const until = Date.now() + ms
      for (;;) {
        const cursor = await appview.cursor()
        if (cursor >= seq) return
        if (Date.now() > until) throw new Error(`the AppView indexed up to seq ${cursor}, not ${seq}, within ${ms}ms`)
        await new Promise((r) => setTimeout(r, 50))
      }
    },
    async catchUp(pds, ms) {
      await appview.waitForSeq(await latestSeq(pds), ms)
    },
    hold: async () => void (await control('POST', '/ingester/hold')),
    release: async () => void (await control('POST', '/ingester/release')),
  }

  return {
    plcUrl: plc.url,
    appview: started.appview,
    ozone: started.ozone,
    pdsEnv: {
      PDS_DID_PLC_URL: plc.url,
      PDS_CRAWLERS: '',
      PDS_BSKY_APP_VIEW_URL: started.appview.url,
      PDS_BSKY_APP_VIEW_DID: started.appview.did,
      PDS_MOD_SERVICE_URL: started.ozone.url,
      PDS_MOD_SERVICE_DID: started.ozone.did,
    },
    async startAppView({ pds }) {
      await control('POST', '/ingest', { pdsUrl: pds.url })
      return appview
    },
    async startOzone({ pds }) {
      await control('POST', '/ozone/start', { pdsUrl: pds.url, pdsDid: pds.services.config.serviceDid })
      return {
        ...started.ozone,
        addMember: async (did, role) => void (await control('POST', '/ozone/team', { did, role })),
        memberHeaders: async (lxm, role = 'moderator') =>
          control('GET', `/ozone/headers?${new URLSearchParams({ lxm, role })}`) as Promise<{ authorization: string }>,
        process: async () => void (await control('POST', '/ozone/process')),
      }
    },
    stop,
  }
}

/** the last seq `pds` has sequenced (0 before any event) */
export async function latestSeq(pds: TestPds): Promise<number> {
  const row = await pds.services.db
    .selectFrom('event')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .executeTakeFirst()
  return Number(row?.seq ?? 0)
}

async function dropSchemas(schemas: string[]) {
  const client = new pg.Client({ connectionString: postgresUrl })
  await client.connect()
  try {
    for (const schema of schemas) await client.query(`drop schema if exists "${schema}" cascade`)
  } finally {
    await client.end()
  }
}
