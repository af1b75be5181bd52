// Each email provider's HTTP API as a loopback stand-in: the exact request the http-json backend
// sends it (path, authentication, body fields), configured the way an operator does.
import { spawnSync } from 'node:child_process'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createHash, createHmac } from 'node:crypto'
import { pino } from 'pino'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, tempDir } from './harness.js'
import { loadConfig } from '../src/config.js'
import { createMailer } from '../src/mail/index.js'
import { signV4 } from '../src/mail/sigv4.js'

type Seen = { method?: string; path?: string; headers: IncomingHttpHeaders; body: string }
let seen: Seen[] = []
let base = ''
const server = createServer((req, res) => {
  let body = ''
  req.on('data', (c) => (body += c))
  req.on('end', () => {
    seen.push({ method: req.method, path: req.url, headers: req.headers, body })
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"x"}')
  })
})

const MAIL = { to: 'alice@example.com', subject: 'Reset your password', text: 'Your code:\n\nABCDE-12345\n' }

async function sendWith(env: Record<string, string>) {
  seen = []
  const config = loadConfig({
    PDS_DATA_DIRECTORY: tempDir(),
    PDS_JWT_SECRET: 'x'.repeat(32),
    PDS_OAUTH_SIGNING_KEY: '1'.repeat(64),
    PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: '2'.repeat(64),
    PDS_EMAIL_BACKEND: 'http-json',
    PDS_EMAIL_FROM: 'pds@example.com',
    ...env,
  })
  await createMailer(config.email, pino({ level: 'silent' })).send(MAIL)
  expect(seen).toHaveLength(1)
  expect(seen[0].method).toBe('POST')
  return seen[0]
}

describe('email providers', () => {
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => server.close())

  it('Resend: bearer key, JSON with a to list and reply_to', async () => {
    const r = await sendWith({ PDS_EMAIL_HTTP_FLAVOR: 'resend', PDS_EMAIL_HTTP_URL: `${base}/emails`, PDS_EMAIL_HTTP_TOKEN: 're_key' })
    expect(r.path).toBe('/emails')
    expect(r.headers.authorization).toBe('Bearer re_key')
    expect(r.headers['content-type']).toBe('application/json')
    expect(JSON.parse(r.body)).toEqual({
      from: 'pds@example.com',
      to: ['alice@example.com'],
      subject: MAIL.subject,
      text: MAIL.text,
      reply_to: 'pds@example.com',
    })
  })

  it('SendGrid: bearer key, personalizations and a text/plain content part', async () => {
    const r = await sendWith({
      PDS_EMAIL_HTTP_FLAVOR: 'sendgrid',
      PDS_EMAIL_HTTP_URL: `${base}/v3/mail/send`,
      PDS_EMAIL_HTTP_TOKEN: 'SG.key',
    })
    expect(r.path).toBe('/v3/mail/send')
    expect(r.headers.authorization).toBe('Bearer SG.key')
    expect(JSON.parse(r.body)).toEqual({
      personalizations: [{ to: [{ email: 'alice@example.com' }] }],
      from: { email: 'pds@example.com' },
      reply_to: { email: 'pds@example.com' },
      subject: MAIL.subject,
      content: [{ type: 'text/plain', value: MAIL.text }],
    })
  })

  it('Mailgun: basic auth as api, a form with from, to, subject, text', async () => {
    const r = await sendWith({
      PDS_EMAIL_HTTP_FLAVOR: 'mailgun',
      PDS_EMAIL_HTTP_URL: `${base}/v3/mg.example.com/messages`,
      PDS_EMAIL_HTTP_TOKEN: 'key-123',
    })
    expect(r.path).toBe('/v3/mg.example.com/messages')
    expect(r.headers.authorization).toBe(`Basic ${Buffer.from('api:key-123').toString('base64')}`)
    expect(r.headers['content-type']).toBe('application/x-www-form-urlencoded')
    expect(Object.fromEntries(new URLSearchParams(r.body))).toEqual({
      from: 'pds@example.com',
      to: 'alice@example.com',
      subject: MAIL.subject,
      text: MAIL.text,
      'h:Reply-To': 'pds@example.com',
    })
  })

  it('Postmark: its server-token header and PascalCase fields', async () => {
    const r = await sendWith({ PDS_EMAIL_HTTP_FLAVOR: 'postmark', PDS_EMAIL_HTTP_URL: `${base}/email`, PDS_EMAIL_HTTP_TOKEN: 'pm-token' })
    expect(r.path).toBe('/email')
    expect(r.headers['x-postmark-server-token']).toBe('pm-token')
    expect(JSON.parse(r.body)).toEqual({
      From: 'pds@example.com',
      To: 'alice@example.com',
      Subject: MAIL.subject,
      TextBody: MAIL.text,
      ReplyTo: 'pds@example.com',
    })
  })

  it('Amazon SES v2: SendEmail body, signed with SigV4 for the ses service and the region', async () => {
    const r = await sendWith({
      PDS_EMAIL_HTTP_FLAVOR: 'ses',
      PDS_EMAIL_HTTP_URL: base,
      PDS_EMAIL_HTTP_TOKEN: 'AKIDTEST:secretKEY/xyz',
      PDS_EMAIL_SES_REGION: 'eu-west-1',
    })
    expect(r.path).toBe('/v2/email/outbound-emails')
    expect(JSON.parse(r.body)).toEqual({
      FromEmailAddress: 'pds@example.com',
      Destination: { ToAddresses: ['alice@example.com'] },
      ReplyToAddresses: ['pds@example.com'],
      Content: { Simple: { Subject: { Data: MAIL.subject, Charset: 'UTF-8' }, Body: { Text: { Data: MAIL.text, Charset: 'UTF-8' } } } },
    })
    const amzDate = String(r.headers['x-amz-date'])
    expect(amzDate).toMatch(/^\d{8}T\d{6}Z$/)
    expect(r.headers['x-amz-content-sha256']).toBe(createHash('sha256').update(r.body).digest('hex'))
    const auth = String(r.headers.authorization)
    expect(auth).toMatch(
      new RegExp(
        `^AWS4-HMAC-SHA256 Credential=AKIDTEST/${amzDate.slice(0, 8)}/eu-west-1/ses/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$`,
      ),
    )
    // the signature, recomputed here from what arrived, step by step
    const headers = ['content-type', 'host', 'x-amz-content-sha256', 'x-amz-date'].map((h) => `${h}:${r.headers[h]}\n`).join('')
    const canonical = [
      'POST',
      '/v2/email/outbound-emails',
      '',
      headers,
      'content-type;host;x-amz-content-sha256;x-amz-date',
      r.headers['x-amz-content-sha256'],
    ].join('\n')
    const scope = `${amzDate.slice(0, 8)}/eu-west-1/ses/aws4_request`
    const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, createHash('sha256').update(canonical).digest('hex')].join('\n')
    const h = (k: string | Buffer, d: string) => createHmac('sha256', k).update(d).digest()
    const key = h(h(h(h('AWS4secretKEY/xyz', amzDate.slice(0, 8)), 'eu-west-1'), 'ses'), 'aws4_request')
    expect(auth.endsWith(`Signature=${createHmac('sha256', key).update(toSign).digest('hex')}`)).toBe(true)
  })

  it('SigV4 matches the AWS test suite (get-vanilla)', () => {
    const out = signV4(
      { method: 'GET', url: 'https://example.amazonaws.com/', headers: {}, body: '' },
      { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', region: 'us-east-1', service: 'service' },
      new Date('2015-08-30T12:36:00Z'),
      { contentHashHeader: false },
    )
    expect(out.authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31',
    )
  })

  it('a reference-style PDS_EMAIL_SMTP_URL stops the server with one line naming the HTTP providers', () => {
    const r = spawnSync(process.execPath, [new URL('../dist/bin.js', import.meta.url).pathname], {
      env: {
        PATH: process.env.PATH ?? '',
        PDS_DATA_DIRECTORY: tempDir(),
        PDS_EMAIL_SMTP_URL: 'smtps://user:pass@smtp.example.com:465',
        PDS_LOG_LEVEL: 'silent',
      },
      encoding: 'utf8',
      timeout: 20_000,
    })
    expect(r.status).toBe(1)
    const lines = r.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      /^config error: PDS_EMAIL_SMTP_URL: SMTP is not supported; set PDS_EMAIL_BACKEND=http-json with PDS_EMAIL_HTTP_FLAVOR \(.*resend.*ses\)/,
    )
    expect(r.stderr).not.toContain('pass@')
  })
})
