// Crash safety: SIGKILL the server process in the middle of a burst of writes, restart it on the
// same data directory (and schema), and every acknowledged write is there and the repo verifies.
import { spawn, type ChildProcess } from 'node:child_process'
import { rmSync } from 'node:fs'
import { verifyRepoCar } from '@atproto/repo'
import { afterEach, expect, it } from 'vitest'
import { describe, dropSchema, freePort, tempDir, testEnv, xrpc } from './harness.js'

const BIN = new URL('../dist/bin.js', import.meta.url).pathname
const children: ChildProcess[] = []

function run(env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'ignore' })
  children.push(child)
  return { child, exited: new Promise<void>((resolve) => child.on('exit', () => resolve())) }
}

async function waitHealthy(url: string) {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/xrpc/_health`)).ok) return
    } catch {}
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('server did not become healthy within 10 s')
}

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
})

describe('crash safety', () => {
  it('keeps every acknowledged write across a SIGKILL mid-burst', async () => {
    const port = await freePort()
    const dir = tempDir()
    const env = await testEnv(port, dir)
    const url = `http://127.0.0.1:${port}`
    try {
      let p = run(env)
      await waitHealthy(url)
      const acct = await xrpc(url, 'com.atproto.server.createAccount', {
        body: { handle: 'crashy.test', email: 'crash@example.com', password: 'correct horse battery' },
      })
      expect(acct.status).toBe(200)
      const { did, accessJwt } = acct.body

      const acked: { rkey: string; cid: string }[] = []
      let stop = false
      const writer = async (w: number) => {
        for (let i = 0; !stop && i < 500; i++) {
          const rkey = `w${w}n${i}`
          try {
            const r = await xrpc(url, 'com.atproto.repo.createRecord', {
              headers: { authorization: `Bearer ${accessJwt}` },
              body: { repo: did, collection: 'com.example.crash', rkey, record: { w, i } },
            })
            if (r.status === 200) acked.push({ rkey, cid: r.body.cid })
          } catch {
            return // connection died with the process
          }
        }
      }
      const burst = Promise.all([0, 1, 2, 3].map(writer))
      // kill once some writes are acknowledged and more are in flight
      for (let i = 0; i < 200 && acked.length < 20; i++) await new Promise((r) => setTimeout(r, 25))
      p.child.kill('SIGKILL')
      await p.exited
      stop = true
      await burst
      expect(acked.length).toBeGreaterThanOrEqual(20)

      p = run(env)
      await waitHealthy(url)
      for (const a of acked) {
        const r = await xrpc(url, 'com.atproto.repo.getRecord', {
          params: { repo: did, collection: 'com.example.crash', rkey: a.rkey },
        })
        expect(r.status, a.rkey).toBe(200)
        expect(r.body.cid).toBe(a.cid)
      }
      const car = new Uint8Array(await (await fetch(`${url}/xrpc/com.atproto.sync.getRepo?did=${did}`)).arrayBuffer())
      const doc = (await xrpc(url, 'com.atproto.identity.resolveDid', { params: { did } })).body.didDoc
      const verified = await verifyRepoCar(car, did, 'did:key:' + doc.verificationMethod[0].publicKeyMultibase)
      const inRepo = new Set(verified.creates.map((c) => c.rkey))
      for (const a of acked) expect(inRepo.has(a.rkey)).toBe(true)
      // the index and the repository agree, and the server keeps writing after the restart
      const after = await xrpc(url, 'com.atproto.repo.createRecord', {
        headers: { authorization: `Bearer ${accessJwt}` },
        body: { repo: did, collection: 'com.example.crash', rkey: 'after', record: { ok: true } },
      })
      expect(after.status).toBe(200)
      p.child.kill('SIGTERM')
      await p.exited
    } finally {
      await dropSchema(env)
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
