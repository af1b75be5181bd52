// A real HTTP endpoint on loopback standing in for an email API: it records every POST and
// answers with whatever the test sets (200, a 500, or never).
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export type Received = { headers: IncomingHttpHeaders; body: any }
export type MailSink = {
  url: string
  received: Received[]
  mode: 'ok' | 'fail' | 'hang'
  /** waits (bounded) until at least `n` messages arrived */
  waitFor(n: number, ms?: number): Promise<Received[]>
  /** the token line of the latest message to `to` that carries one (notices carry none) */
  tokenFor(to: string): string
  close(): Promise<void>
}

export async function startMailSink(): Promise<MailSink> {
  const hanging: ServerResponse[] = []
  const sink = { received: [] as Received[], mode: 'ok' as MailSink['mode'] }
  const server = createServer((req, res) => {
    let data = ''
    req.on('data', (c) => (data += c))
    req.on('end', () => {
      sink.received.push({ headers: req.headers, body: JSON.parse(data) })
      if (sink.mode === 'hang') return void hanging.push(res)
      res.writeHead(sink.mode === 'fail' ? 500 : 200, { 'content-type': 'application/json' })
      res.end(sink.mode === 'fail' ? '{"error":"down"}' : '{"ok":true}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return Object.assign(sink, {
    url: `http://127.0.0.1:${port}/send`,
    async waitFor(n: number, ms = 5000) {
      const until = Date.now() + ms
      while (sink.received.length < n && Date.now() < until) await new Promise((r) => setTimeout(r, 20))
      return sink.received
    },
    tokenFor(to: string) {
      const mine = sink.received.filter((m) => (m.body.to ?? m.body.To) === to)
      if (!mine.length) throw new Error(`no mail to ${to}`)
      const tokenIn = (m: Received) => ((m.body.text ?? m.body.TextBody) as string).split('\n').find((l) => /^[A-Z2-7]{32}$/.test(l))
      const line = mine.map(tokenIn).findLast((l) => l !== undefined)
      if (!line) throw new Error(`no token in mail to ${to}`)
      return line
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  })
}

/** the environment that points a test server's http-json email backend at `sink` */
export const sinkEnv = (sink: MailSink, extra: Record<string, string> = {}) => ({
  PDS_EMAIL_BACKEND: 'http-json',
  PDS_EMAIL_HTTP_URL: sink.url,
  PDS_EMAIL_HTTP_TOKEN: 'sink-token',
  PDS_EMAIL_FROM: 'pds@example.com',
  ...extra,
})
