// Starting the servers under test as child processes (so /proc/<pid> is the server alone):
// ours from dist/bin.js on the pinned Node, the reference from bench/peer/ on Node 24.18.1.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
export const RESULTS = path.join(ROOT, 'bench', 'results')
export const PEER_NODE_VERSION = '24.18.1'
export const PEER_NODE = path.join(ROOT, '.tools', `node-${PEER_NODE_VERSION}`, 'bin', 'node')

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

async function waitHealthy(url, child, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with code ${child.exitCode} before serving`)
    try {
      const res = await request(`${url}/xrpc/_health`, { headersTimeout: 2000, bodyTimeout: 2000 })
      await res.body.text()
      if (res.statusCode === 200) return
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`server at ${url} not healthy within ${timeoutMs} ms`)
}

// every server this process started, so an interrupted or timed-out run never leaves one behind
const live = new Set()
export function killAll() {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
}
process.on('exit', killAll)

function launch({ label, cmd, args, env, cwd, url, dataDir, cleanup }) {
  mkdirSync(RESULTS, { recursive: true })
  const logFile = path.join(RESULTS, `${label}.server.log`)
  const log = createWriteStream(logFile)
  const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  live.add(child)
  child.once('exit', () => live.delete(child))
  child.stdout.pipe(log)
  child.stderr.pipe(log)
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 8000)
      await exited
      clearTimeout(timer)
    }
    log.end()
    await cleanup?.()
    rmSync(dataDir, { recursive: true, force: true })
  }
  return { label, child, pid: child.pid, url, logFile, stop }
}

/** Ours: `node dist/bin.js`, rate limits off, quiet logs, a temp data dir; SQLite or PostgreSQL. */
export async function startOurs({ db = 'sqlite', label = 'ours', cpuProf = false, dir = ROOT, env: extraEnv } = {}) {
  const bin = path.join(dir, 'dist', 'bin.js')
  if (!existsSync(bin)) throw new Error(`${bin} missing: run \`make build\` first`)
  const port = await freePort()
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'pds-bench-ours-'))
  const url = `http://127.0.0.1:${port}`
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    PDS_PORT: String(port),
    PDS_BIND: '127.0.0.1',
    PDS_HOSTNAME: 'localhost',
    PDS_DATA_DIRECTORY: dataDir,
    PDS_RATE_LIMITS_ENABLED: 'false',
    PDS_LOG_LEVEL: 'warn',
    PDS_SERVICE_HANDLE_DOMAINS: '.test',
    ...extraEnv?.(port),
  }
  let cleanup
  if (db === 'postgres') {
    const pgUrl = process.env.PDS_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test'
    const schema = `bench_${process.pid}_${Date.now().toString(36)}`
    Object.assign(env, {
      PDS_DB_POSTGRES_URL: pgUrl,
      PDS_DB_POSTGRES_SCHEMA: schema,
      PDS_JWT_SECRET: randomBytes(32).toString('hex'),
      PDS_OAUTH_SIGNING_KEY: randomBytes(32).toString('hex'),
      PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: randomBytes(32).toString('hex'),
    })
    cleanup = async () => {
      const { default: pg } = await import('pg')
      const client = new pg.Client({ connectionString: pgUrl })
      try {
        await client.connect()
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      } finally {
        await client.end().catch(() => {})
      }
    }
  } else if (db !== 'sqlite') {
    throw new Error(`unknown --db ${db} (sqlite or postgres)`)
  }
  const srv = launch({
    label,
    cmd: process.execPath,
    // --cpu-prof: a V8 CPU profile of the server, written when it stops (for `--profile`)
    args: cpuProf ? ['--cpu-prof', '--cpu-prof-dir', path.join(RESULTS, 'profiles'), bin] : [bin],
    env,
    cwd: dir,
    url,
    dataDir,
    cleanup,
  })
  try {
    await waitHealthy(url, srv.child, 60_000)
  } catch (err) {
    await srv.stop()
    throw new Error(`${err.message} (log: ${srv.logFile})`, { cause: err })
  }
  return { ...srv, kind: 'ours', db, publicUrl: env.PDS_PUBLIC_URL ?? `http://localhost:${port}` }
}

/** The reference PDS from bench/peer/ (see bench/peer/server.mjs), on Node 24.18.1. */
export async function startPeer({ label = 'reference' } = {}) {
  const script = path.join(ROOT, 'bench', 'peer', 'server.mjs')
  if (!existsSync(PEER_NODE)) throw new Error(`${PEER_NODE} missing: run \`make bench-compare\``)
  if (!existsSync(path.join(ROOT, 'bench', 'peer', 'node_modules', '@atproto', 'pds'))) {
    throw new Error('bench/peer/node_modules missing: run `make bench-compare`')
  }
  const port = await freePort()
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'pds-bench-ref-'))
  const url = `http://127.0.0.1:${port}`
  const srv = launch({
    label,
    cmd: PEER_NODE,
    args: [script, '--port', String(port), '--data', dataDir],
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LOG_ENABLED: 'false',
      PDS_RATE_LIMITS_ENABLED: 'false',
    },
    cwd: path.join(ROOT, 'bench', 'peer'),
    url,
    dataDir,
  })
  try {
    await waitHealthy(url, srv.child, 120_000)
  } catch (err) {
    await srv.stop()
    throw new Error(`${err.message} (log: ${srv.logFile})`, { cause: err })
  }
  return { ...srv, kind: 'reference', db: 'sqlite' }
}
