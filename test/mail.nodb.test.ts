// The console backend and the http-json backend's failures, without a server.
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe } from './harness.js'
import { createMailer, MailDeliveryError } from '../src/mail/index.js'
import { startMailSink, type MailSink } from './mail-sink.js'

function capture() {
  const lines: any[] = []
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l))
      cb()
    },
  })
  return { logger: pino({ level: 'info' }, stream), lines }
}

describe('outgoing email backends', () => {
  let sink: MailSink
  beforeAll(async () => {
    sink = await startMailSink()
  })
  afterAll(() => sink?.close())

  it('console: one structured log line with the body, token included, between two divider lines', async () => {
    const { logger, lines } = capture()
    const mailer = createMailer({ backend: 'console', from: 'noreply@localhost' }, logger)
    await mailer.send({ to: 'a@example.com', subject: 'Reset your password', text: 'Your code:\n\nABCDEFGHIJKLMNOPQRSTUVWXYZ234567\n' })
    expect(lines).toHaveLength(1)
    expect(lines[0].mail).toMatchObject({ to: 'a@example.com', subject: 'Reset your password' })
    const body: string[] = lines[0].mail.body.split('\n')
    expect(body[0]).toMatch(/^-{10,}$/)
    expect(body.at(-1)).toBe(body[0])
    expect(body).toContain('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567')
  })

  it('http-json: fails with an error log on a 500, and never logs the body or the bearer token', async () => {
    const { logger, lines } = capture()
    const mailer = createMailer(
      { backend: 'http-json', from: 'pds@example.com', url: sink.url, token: 'secret-bearer', flavor: 'generic', timeoutMs: 2000 },
      logger,
    )
    sink.mode = 'fail'
    await expect(mailer.send({ to: 'b@example.com', subject: 'S', text: 'TOKEN-IN-BODY' })).rejects.toBeInstanceOf(MailDeliveryError)
    expect(lines.map((l) => l.level)).toEqual([50])
    expect(lines[0].status).toBe(500)
    expect(JSON.stringify(lines)).not.toMatch(/TOKEN-IN-BODY|secret-bearer/)
  })

  it('http-json: fails on a network error and on an endpoint that never answers within the timeout', async () => {
    const { logger, lines } = capture()
    const refused = createMailer(
      { backend: 'http-json', from: 'pds@example.com', url: 'http://127.0.0.1:1/send', token: 't', flavor: 'generic', timeoutMs: 2000 },
      logger,
    )
    await expect(refused.send({ to: 'c@example.com', subject: 'S', text: 'x' })).rejects.toBeInstanceOf(MailDeliveryError)
    sink.mode = 'hang'
    const slow = createMailer(
      { backend: 'http-json', from: 'pds@example.com', url: sink.url, token: 't', flavor: 'generic', timeoutMs: 200 },
      logger,
    )
    const started = Date.now()
    await expect(slow.send({ to: 'c@example.com', subject: 'S', text: 'x' })).rejects.toThrow(/no answer within 200 ms/)
    expect(Date.now() - started).toBeLessThan(3000)
    expect(lines.every((l) => l.level === 50)).toBe(true)
  })
})
