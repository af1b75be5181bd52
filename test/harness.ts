// One way to start a real server for a test: a fresh data directory, an ephemeral loopback port,
// and on the postgres project a fresh schema that is dropped afterwards.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AtpAgent } from '@atproto/api'
import pg from 'pg'
import { describe as vdescribe } from 'vitest'
import { loadConfig } from '../src/config.js'
import { startPds, type Pds, type StartOptions } from '../src/server.js'
import { AtpBaseClient } from '../src/generated/client/index.js'

export const dialect = process.env.PDS_TEST_DIALECT === 'postgres' ? 'postgres' : 'sqlite'
export const postgresUrl = process.env.PDS_TEST_POSTGRES_URL
export const redisUrl = process.env.PDS_TEST_REDIS_URL

/** `describe` that reports skipped on the postgres project when no PostgreSQL is configured */
export const describe: typeof vdescribe = dialect === 'postgres' && !postgresUrl ? (vdescribe.skip as typeof vdescribe) : vdescribe

export const JWT_SECRET = 'test-jwt-secret-0123456789abcdef'
export const ADMIN_PASSWORD = 'test-admin-password'

export type TestPds = Pds & {
  env: Record<string, string>
  dataDir: string
  client(): AtpBaseClient
  /** stops the server and removes its data */
  stop(): Promise<void>
  /** stops the server and starts a new one on the same data, port and environment */
  restart(): Promise<TestPds>
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
    s.once('error', reject)
  })
}

export function tempDir(prefix = 'pds-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

/** environment for a test server on `port` with its data in `dataDir` */
export async function testEnv(port: number, dataDir: string, extra: Record<string, string> = {}) {
  const env: Record<string, string> = {
    PDS_PORT: String(port),
    PDS_BIND: '127.0.0.1',
    PDS_HOSTNAME: 'localhost',
    PDS_PUBLIC_URL: `http://localhost:${port}`,
    PDS_DATA_DIRECTORY: dataDir,
    PDS_JWT_SECRET: JWT_SECRET,
    PDS_OAUTH_SIGNING_KEY: '1'.repeat(64),
    PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: '2'.repeat(64),
    PDS_ADMIN_PASSWORD: ADMIN_PASSWORD,
    PDS_LOG_LEVEL: 'silent',
    PDS_RATE_LIMITS_ENABLED: 'false',
    PDS_SERVICE_HANDLE_DOMAINS: '.test',
  }
  if (dialect === 'postgres' && postgresUrl) {
    env.PDS_DB_POSTGRES_URL = postgresUrl
    env.PDS_DB_POSTGRES_SCHEMA = `t_${randomBytes(6).toString('hex')}`
  }
  return { ...env, ...extra }
}

/** for a server outside development mode: no public PLC directory, no relay */
export const OFF_NETWORK = { PDS_DID_PLC_URL: 'local', PDS_CRAWLERS: '' }

export async function startTestPds(extra: Record<string, string> = {}, opts: StartOptions & { dataDir?: string } = {}): Promise<TestPds> {
  const dataDir = opts.dataDir ?? tempDir()
  const env = await testEnv(await freePort(), dataDir, extra)
  return launch(env, dataDir, opts)
}

async function launch(env: Record<string, string>, dataDir: string, opts: StartOptions): Promise<TestPds> {
  const config = loadConfig(env)
  // outside development mode the defaults are plc.directory and bsky.network: a test never calls them
  if (!config.devMode && (env.PDS_DID_PLC_URL === undefined || env.PDS_CRAWLERS === undefined)) {
    throw new Error('a test server outside development mode needs PDS_DID_PLC_URL and PDS_CRAWLERS set (see OFF_NETWORK)')
  }
  const pds = await startPds(config, { validateResponses: true, ...opts })
  return Object.assign(pds, {
    env,
    dataDir,
    client: () => new AtpBaseClient({ service: pds.url }),
    stop: async () => {
      await pds.close()
      await dropSchema(env)
      rmSync(dataDir, { recursive: true, force: true })
    },
    restart: async () => {
      await pds.close()
      return launch(env, dataDir, opts)
    },
  })
}

export async function dropSchema(env: Record<string, string>) {
  if (!env.PDS_DB_POSTGRES_URL || !env.PDS_DB_POSTGRES_SCHEMA) return
  const client = new pg.Client({ connectionString: env.PDS_DB_POSTGRES_URL })
  await client.connect()
  try {
    await client.query(`drop schema if exists "${env.PDS_DB_POSTGRES_SCHEMA}" cascade`)
  } finally {
    await client.end()
  }
}

/** raw XRPC call: returns status and parsed JSON (or text) body */
export async function xrpc(
  url: string,
  nsid: string,
  opts: { method?: 'GET' | 'POST'; params?: Record<string, string>; body?: unknown; headers?: Record<string, string> } = {},
) {
  const qs = opts.params ? '?' + new URLSearchParams(opts.params).toString() : ''
  const method = opts.method ?? (opts.body !== undefined ? 'POST' : 'GET')
  const headers: Record<string, string> = { ...opts.headers }
  let body: string | undefined
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body)
    headers['content-type'] ??= 'application/json'
  }
  const res = await fetch(`${url}/xrpc/${nsid}${qs}`, { method, headers, body })
  const text = await res.text()
  let json: any
  try {
    json = text ? JSON.parse(text) : undefined
  } catch {
    json = undefined
  }
  return { status: res.status, body: json, text, headers: res.headers }
}

export const PASSWORD = 'correct horse battery staple'
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

let accounts = 0
/**
 * a fresh account on `url`: handle `<prefix><n>x.test`, email `<prefix><n>@example.com`, PASSWORD;
 * `extra` adds createAccount fields (an invite code, a recovery key)
 */
export async function newAccount(url: string, prefix: string, extra: Record<string, unknown> = {}) {
  const n = ++accounts
  const email = `${prefix}${n}@example.com`
  const res = await xrpc(url, 'com.atproto.server.createAccount', {
    body: { handle: `${prefix}${n}x.test`, email, password: PASSWORD, ...extra },
  })
  if (res.status !== 200) throw new Error(`createAccount failed: ${res.status} ${res.text}`)
  type Created = { did: string; handle: string; accessJwt: string; refreshJwt: string; didDoc?: any }
  return { ...(res.body as Created), email }
}

/** a fresh account on `url` as newAccount makes it, signed in through an AtpAgent */
export async function agentAccount(url: string, prefix: string) {
  const n = ++accounts
  const agent = new AtpAgent({ service: url })
  const email = `${prefix}${n}@example.com`
  await agent.createAccount({ handle: `${prefix}${n}x.test`, email, password: PASSWORD })
  return { agent, did: agent.did!, handle: agent.session!.handle, email }
}

/** an AtpAgent signed in to a fresh account on `url` */
export async function newAgent(url: string, prefix: string) {
  return (await agentAccount(url, prefix)).agent
}

export type AgentAccount = Awaited<ReturnType<typeof agentAccount>>
