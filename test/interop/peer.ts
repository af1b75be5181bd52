// The reference PDS (bench/peer/server.mjs: @atproto/pds through @atproto/dev-env, with its own
// in-memory PLC directory) as a child process on Node 24.18.1, for the interop tests. Its stdout
// gives the PLC directory's URL (`PLC <url>`), readiness (`READY <url>`) and every email it sends
// (`MAIL <json>`), which is how a test reads the PLC token the reference emails.
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../harness.js'

const ROOT = new URL('../../', import.meta.url).pathname
const PEER_DIR = join(ROOT, 'bench', 'peer')
const PEER_NODE = join(ROOT, '.tools', 'node-24.18.1', 'bin', 'node')

export type Mail = { template: string; to: string; params: Record<string, any> }

export type Peer = {
  url: string
  plcUrl: string
  mails: Mail[]
  /** waits (bounded) for a mail from `template` to `to` beyond the first `after` such mails */
  waitForMail(template: string, to: string, after?: number, ms?: number): Promise<Mail>
  stop(): Promise<void>
}

export async function startPeer(): Promise<Peer> {
  if (!existsSync(PEER_NODE) || !existsSync(join(PEER_DIR, 'node_modules', '@atproto', 'pds'))) {
    throw new Error('the reference PDS is not installed: run `make test-interop`')
  }
  const port = await freePort()
  const plcPort = await freePort()
  const data = mkdtempSync(join(tmpdir(), 'pds-interop-ref-'))
  const child: ChildProcess = spawn(
    PEER_NODE,
    [join(PEER_DIR, 'server.mjs'), '--port', String(port), '--plc-port', String(plcPort), '--data', data],
    {
      cwd: PEER_DIR,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_ENABLED: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  const mails: Mail[] = []
  let plcUrl = ''
  let stderr = ''
  let buffered = ''
  const ready = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`reference PDS did not start in 90s: ${stderr.slice(-2000)}`)), 90_000)
    child.stdout!.on('data', (chunk) => {
      buffered += chunk
      let nl: number
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        if (line.startsWith('MAIL ')) mails.push(JSON.parse(line.slice(5)))
        else if (line.startsWith('PLC ')) plcUrl = line.slice(4).trim()
        else if (line.startsWith('READY ')) {
          clearTimeout(timer)
          resolve(line.slice(6).trim())
        }
      }
    })
    child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-10_000)))
    child.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`reference PDS exited (${code}): ${stderr.slice(-2000)}`))
    })
  })
  let url: string
  try {
    url = await ready
  } catch (err) {
    child.kill('SIGKILL')
    rmSync(data, { recursive: true, force: true })
    throw err
  }
  return {
    url,
    plcUrl,
    mails,
    async waitForMail(template, to, after = 0, ms = 10_000) {
      const until = Date.now() + ms
      for (;;) {
        const found = mails.filter((m) => m.template === template && m.to === to)
        if (found.length > after) return found[after]
        if (Date.now() > until) throw new Error(`no ${template} mail to ${to} within ${ms}ms`)
        await new Promise((r) => setTimeout(r, 50))
      }
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
        await exited
        clearTimeout(timer)
      }
      rmSync(data, { recursive: true, force: true })
    },
  }
}
