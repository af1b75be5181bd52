// Stopping what was started: each part of the start registers its own teardown, closing runs them
// newest first, a step that fails or hangs does not keep the others from running, and closing
// twice stops once. A start that fails half-way stops what it had started.
import { createServer } from 'node:net'
import { pino } from 'pino'
import { afterAll, expect, it } from 'vitest'
import { loadConfig } from '../src/config.js'
import { startPds } from '../src/server.js'
import { Lifecycle } from '../src/start/lifecycle.js'
import { StartupError } from '../src/startup-errors.js'
import { describe, freePort, newAccount, OFF_NETWORK, tempDir, testEnv, dropSchema } from './harness.js'

type Line = { msg: string; step?: string; level: number }

/** a logger whose lines the test reads */
function capture() {
  const lines: Line[] = []
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) })
  return { logger, lines, messages: () => lines.map((l) => l.msg) }
}

describe('a lifecycle', () => {
  it('closes its steps in reverse order of registration', async () => {
    const { logger } = capture()
    const life = new Lifecycle(logger)
    const order: string[] = []
    for (const name of ['store', 'firehose', 'listener', 'jobs']) life.onClose(name, () => order.push(name))
    await life.close()
    expect(order).toEqual(['jobs', 'listener', 'firehose', 'store'])
  })

  it('runs the other steps when one fails, and logs the failure by name', async () => {
    const { logger, lines } = capture()
    const life = new Lifecycle(logger)
    const order: string[] = []
    life.onClose('store', () => order.push('store'))
    life.onClose('mailer', () => {
      throw new Error('already closed')
    })
    life.onClose('redis', async () => Promise.reject(new Error('connection reset')))
    life.onClose('listener', () => order.push('listener'))
    await life.close()
    expect(order).toEqual(['listener', 'store'])
    const failed = lines.filter((l) => l.msg === 'shutdown step failed; going on')
    expect(failed.map((l) => l.step)).toEqual(['redis', 'mailer'])
  })

  it('gives up on a step that hangs after its bound and goes on', async () => {
    const { logger, lines } = capture()
    const life = new Lifecycle(logger, 100)
    const order: string[] = []
    life.onClose('store', () => order.push('store'))
    life.onClose('stuck', () => new Promise(() => {}))
    const started = Date.now()
    await life.close()
    expect(Date.now() - started).toBeLessThan(2000)
    expect(order).toEqual(['store'])
    expect(lines.find((l) => l.msg === 'shutdown step did not finish in time; going on')?.step).toBe('stuck')
  })

  it('closes once however often it is asked', async () => {
    const { logger } = capture()
    const life = new Lifecycle(logger)
    let closed = 0
    life.onClose('store', async () => {
      await new Promise((r) => setTimeout(r, 20))
      closed++
    })
    const first = life.close()
    const second = life.close()
    await Promise.all([first, second, life.close()])
    await life.close()
    expect(closed).toBe(1)
  })

  it('stops at once a part registered after closing began', async () => {
    const { logger } = capture()
    const life = new Lifecycle(logger)
    await life.close()
    let stopped = false
    life.onClose('late', () => (stopped = true))
    await new Promise((r) => setTimeout(r, 20))
    expect(stopped).toBe(true)
  })
})

describe('the server', () => {
  const schemas: Record<string, string>[] = []
  afterAll(async () => {
    for (const env of schemas) await dropSchema(env)
  })

  it('stops once when closed twice: the listener is gone and nothing failed on the way', async () => {
    const { logger, lines, messages } = capture()
    const env = await testEnv(await freePort(), tempDir(), OFF_NETWORK)
    schemas.push(env)
    const pds = await startPds(loadConfig(env), { logger })
    await newAccount(pds.url, 'closing')
    await Promise.all([pds.close(), pds.close()])
    await pds.close()
    expect(messages().filter((m) => m === 'pds stopped')).toHaveLength(1)
    expect(lines.filter((l) => l.level >= 40 && l.step)).toEqual([])
    await expect(fetch(`${pds.url}/xrpc/_health`)).rejects.toThrow()
  })

  it('stops what it had started when the start fails half-way (port taken)', async () => {
    const taken = createServer()
    const port = await new Promise<number>((r) => taken.listen(0, '127.0.0.1', () => r((taken.address() as { port: number }).port)))
    try {
      const { logger, lines, messages } = capture()
      const dir = tempDir()
      const env = await testEnv(port, dir, OFF_NETWORK)
      schemas.push(env)
      const failed = await startPds(loadConfig(env), { logger }).catch((err: unknown) => err)
      expect(failed).toBeInstanceOf(StartupError)
      expect((failed as StartupError).message).toContain(`port ${port}`)
      // the store, firehose and the rest were closed before the error came back
      expect(messages()).toContain('pds stopped')
      expect(lines.filter((l) => l.level >= 40 && l.step)).toEqual([])
      // and the same data serves at once from a new start
      const again = await startPds(loadConfig({ ...env, PDS_PORT: String(await freePort()) }), { logger })
      try {
        expect((await fetch(`${again.url}/xrpc/_health`)).ok).toBe(true)
      } finally {
        await again.close()
      }
    } finally {
      taken.close()
    }
  })
})
