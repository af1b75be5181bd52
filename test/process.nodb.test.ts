// The server as an operator runs it: `node dist/bin.js` (built by `make test`).
import { spawn, type ChildProcess } from 'node:child_process'
import { statSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { bearer, describe, freePort, newAccount, tempDir, testEnv } from './harness.js'

const BIN = new URL('../dist/bin.js', import.meta.url).pathname
const children: ChildProcess[] = []

function run(env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' })
  children.push(child)
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c) => (stdout += c))
  child.stderr.on('data', (c) => (stderr += c))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, exited, out: () => stdout, err: () => stderr }
}

async function waitHealthy(url: string) {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${url}/xrpc/_health`)).ok) return
    } catch {}
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('server did not become healthy within 5 s')
}

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
})

describe('the server process', () => {
  it('stops at start with one line naming a bad variable', async () => {
    const env = await testEnv(await freePort(), tempDir(), { PDS_PORT: 'eighty' })
    const p = run(env)
    expect(await p.exited).toBe(1)
    const lines = p.err().trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^config error: PDS_PORT: /)
  })

  it('stops at start with one line when the admin password is under 16 characters, without echoing it', async () => {
    const env = await testEnv(await freePort(), tempDir(), { PDS_ADMIN_PASSWORD: 'hunter2-hunter2' })
    const p = run(env)
    expect(await p.exited).toBe(1)
    const lines = p.err().trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^config error: PDS_ADMIN_PASSWORD: must be at least 16 characters/)
    expect(lines[0]).not.toContain('hunter2')
  })

  it('finishes a request in flight on SIGTERM, refuses new ones and exits 0 within 5 s', async () => {
    const port = await freePort()
    const env = await testEnv(port, tempDir(), { PDS_LOG_LEVEL: 'info' })
    const p = run(env)
    const url = `http://127.0.0.1:${port}`
    await waitHealthy(url)

    const body = JSON.stringify({ identifier: 'nobody.test', password: 'whatever' })
    const half = Math.floor(body.length / 2)
    let signalled = 0
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${url}/xrpc/com.atproto.server.createSession`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
      })
      req.on('response', (res) => {
        let text = ''
        res.on('data', (c) => (text += c))
        res.on('end', () => resolve({ status: res.statusCode!, body: text }))
      })
      req.on('error', reject)
      req.write(body.slice(0, half))
      setTimeout(() => {
        signalled = Date.now()
        p.child.kill('SIGTERM')
        setTimeout(() => req.end(body.slice(half)), 500)
      }, 200)
    })

    const res = await response
    expect(res.status).toBe(401)
    expect(JSON.parse(res.body).error).toBe('AuthenticationRequired')
    expect(await p.exited).toBe(0)
    expect(Date.now() - signalled).toBeLessThan(5000)
    await expect(fetch(`${url}/xrpc/_health`)).rejects.toThrow()
    expect(p.out()).toContain('pds stopped')
  })

  it('serves on a second start over the same data directory, keeping its secrets', async () => {
    const port = await freePort()
    const dir = tempDir()
    const env = await testEnv(port, dir, { PDS_LOG_LEVEL: 'info' })
    delete env.PDS_JWT_SECRET
    for (let i = 0; i < 2; i++) {
      const p = run(env)
      await waitHealthy(`http://127.0.0.1:${port}`)
      p.child.kill('SIGTERM')
      expect(await p.exited).toBe(0)
      if (i === 0) expect(p.out()).toContain('generated PDS_JWT_SECRET')
      else expect(p.out()).not.toContain('generated PDS_JWT_SECRET')
    }
  })

  it('keeps its data directory, database and blobs private to its user', async () => {
    const port = await freePort()
    const dir = join(tempDir(), 'data')
    const env = await testEnv(port, dir)
    delete env.PDS_DB_POSTGRES_URL
    delete env.PDS_DB_POSTGRES_SCHEMA
    const p = run(env)
    const url = `http://127.0.0.1:${port}`
    await waitHealthy(url)
    const { accessJwt } = await newAccount(url, 'perm')
    const upload = await fetch(`${url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...bearer(accessJwt), 'content-type': 'image/png' },
      body: new Uint8Array([1, 2, 3]),
    })
    expect(upload.status).toBe(200)
    const cid = ((await upload.json()) as { blob: { ref: { $link: string } } }).blob.ref.$link
    const mode = (path: string) => (statSync(join(dir, path)).mode & 0o777).toString(8)
    expect(mode('.')).toBe('700')
    expect(['pds.sqlite', 'pds.sqlite-wal', 'pds.sqlite-shm'].map(mode)).toEqual(['600', '600', '600'])
    expect([mode('blobs'), mode('blobs/tmp'), mode(join('blobs', cid))]).toEqual(['700', '700', '600'])
    p.child.kill('SIGTERM')
    expect(await p.exited).toBe(0)
  })
})
