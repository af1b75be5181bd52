// PostgreSQL restarted under write load. The suite starts a PostgreSQL cluster of its own (initdb
// and pg_ctl, in a temporary directory, on a free port) so restarting it disturbs no other suite:
// calls in flight while it is down fail with 503 TemporarilyUnavailable within a bound rather than
// hang, the pool reconnects by itself, and no acknowledged write is lost. PostgreSQL project only.
import { spawn, spawnSync } from 'node:child_process'
import { chownSync, existsSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { verifyRepoCar } from '@atproto/repo'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { subscribe } from './firehose-client.js'
import { dialect, describe, freePort, newAccount, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** the directory holding initdb and pg_ctl: on PATH, else the newest Debian package's */
function pgBin(): string | undefined {
  if (spawnSync('initdb', ['--version']).status === 0) return ''
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  const dir = versions.map((v) => join(root, v, 'bin')).find((d) => existsSync(join(d, 'initdb')))
  return dir === undefined ? undefined : dir + '/'
}
const bin = pgBin()

// initdb refuses to run as root: then the cluster belongs to the postgres user
const asRoot = process.getuid?.() === 0
/** runs a PostgreSQL program without blocking the server that shares this process, bounded */
function pg(cmd: string, args: string[]): Promise<void> {
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin + cmd, ...args]] : [bin + cmd, args]
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (out += c))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.on('error', reject)
    child.on('exit', (code) => {
      clearTimeout(timer)
      if (code === 0) resolve()
      else reject(new Error(`${cmd} ${args.join(' ')} failed (${code}): ${out}`))
    })
  })
}

class Cluster {
  dir = tempDir('pds-pg-')
  port = 0
  get url() {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`
  }
  async start() {
    this.port = await freePort()
    if (asRoot) chownSync(this.dir, Number(spawnSync('id', ['-u', 'postgres']).stdout), Number(spawnSync('id', ['-g', 'postgres']).stdout))
    await pg('initdb', ['-D', join(this.dir, 'data'), '-U', 'postgres', '-A', 'trust', '--no-sync'])
    await this.ctl('start')
    return this
  }
  /** pg_ctl `action`, waiting (bounded) until it has taken effect */
  ctl(action: 'start' | 'restart' | 'stop', mode = 'fast') {
    const opts = `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir} -c fsync=off`
    return pg('pg_ctl', ['-D', join(this.dir, 'data'), '-l', join(this.dir, 'log'), '-w', '-t', '30', '-m', mode, '-o', opts, action])
  }
  async stop() {
    try {
      await this.ctl('stop', 'immediate')
    } finally {
      rmSync(this.dir, { recursive: true, force: true })
    }
  }
}

const d = dialect === 'postgres' && bin !== undefined ? describe : describe.skip

d('PostgreSQL restarted under write load', () => {
  let cluster: Cluster | undefined
  let pds: TestPds

  beforeAll(async () => {
    cluster = await new Cluster().start()
    pds = await startTestPds({ PDS_DB_POSTGRES_URL: cluster.url })
  })
  afterAll(async () => {
    try {
      await pds?.stop()
    } finally {
      await cluster?.stop()
    }
  })

  it('fails calls in flight with 503 TemporarilyUnavailable within a bound, reconnects, and loses no acknowledged write', async () => {
    const acct = await newAccount(pds.url, 'pgrestart')
    const auth = { authorization: `Bearer ${acct.accessJwt}` }
    const create = async (rkey: string) => {
      const t0 = Date.now()
      const r = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
        headers: auth,
        body: { repo: acct.did, collection: 'com.example.pgrestart', rkey, record: { $type: 'com.example.pgrestart', rkey } },
      })
      return { ...r, ms: Date.now() - t0 }
    }

    const acked: { rkey: string; cid: string }[] = []
    const failures: { status: number; error?: string; ms: number }[] = []
    let slowest = 0
    let restarted = false
    let okAfterRestart = 0
    const writer = async (w: number) => {
      // until the restart is over and a few writes went through on the new connections
      for (let i = 0; i < 2000 && !(restarted && okAfterRestart >= 20); i++) {
        const rkey = `w${w}n${i}`
        const r = await create(rkey)
        slowest = Math.max(slowest, r.ms)
        if (r.status === 200) {
          acked.push({ rkey, cid: r.body.cid })
          if (restarted) okAfterRestart++
        } else {
          failures.push({ status: r.status, error: r.body?.error, ms: r.ms })
          await sleep(50)
        }
      }
    }
    const burst = Promise.all([0, 1, 2, 3].map(writer))
    for (let i = 0; i < 400 && acked.length < 20; i++) await sleep(10)
    await cluster!.ctl('restart')
    restarted = true
    await burst

    expect(okAfterRestart).toBeGreaterThanOrEqual(20)
    // writes kept arriving while PostgreSQL was down: some were caught by it
    expect(failures.length).toBeGreaterThan(0)
    // a call caught by the restart is refused plainly and promptly, never an internal error or a hang
    for (const f of failures) expect({ status: f.status, error: f.error }).toEqual({ status: 503, error: 'TemporarilyUnavailable' })
    expect(slowest).toBeLessThan(15_000)
    expect((await fetch(`${pds.url}/xrpc/_health`)).status).toBe(200)

    // every acknowledged write is there, in the index and in the signed repository
    for (const a of acked) {
      const r = await xrpc(pds.url, 'com.atproto.repo.getRecord', {
        params: { repo: acct.did, collection: 'com.example.pgrestart', rkey: a.rkey },
      })
      expect(r.status, a.rkey).toBe(200)
      expect(r.body.cid).toBe(a.cid)
    }
    const car = new Uint8Array(await (await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${acct.did}`)).arrayBuffer())
    const doc = (await xrpc(pds.url, 'com.atproto.identity.resolveDid', { params: { did: acct.did } })).body.didDoc
    const verified = await verifyRepoCar(car, acct.did, 'did:key:' + doc.verificationMethod[0].publicKeyMultibase)
    expect(verified.creates.map((c) => c.rkey).sort()).toEqual(acked.map((a) => a.rkey).sort())

    // the firehose's wake-up reconnected too: a new write reaches a live subscriber promptly
    const fh = await subscribe(pds.url)
    try {
      const after = await create('after-restart')
      expect(after.status).toBe(200)
      await fh.until((f) => f.some((x) => x.t === '#commit' && x.body.rev === after.body.commit.rev), 5000)
    } finally {
      fh.close()
    }
  }, 120_000)
})
