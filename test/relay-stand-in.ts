// A loopback relay standing in for the network's: records every requestCrawl, answering each with
// the next status of its script (200 once the script runs out), and answers getHostStatus with
// what a test sets.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

const REQUEST_CRAWL = '/xrpc/com.atproto.sync.requestCrawl'

export class StandInRelay {
  server!: Server
  url = ''
  /** every requestCrawl, in order */
  calls: { path: string; body: any; at: number }[] = []
  /** the statuses of the next requestCrawl answers */
  script: number[] = []
  /** what getHostStatus answers */
  hostStatus: { status: number; body: unknown } = { status: 200, body: { hostname: 'localhost', status: 'active' } }

  /** the hostnames the relay was asked to crawl, and when */
  get crawls(): { hostname: string; at: number }[] {
    return this.calls.map((c) => ({ hostname: c.body?.hostname, at: c.at }))
  }

  async start() {
    this.server = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        const path = (req.url ?? '').split('?')[0]
        if (path === '/xrpc/com.atproto.sync.getHostStatus') {
          return res.writeHead(this.hostStatus.status, { 'content-type': 'application/json' }).end(JSON.stringify(this.hostStatus.body))
        }
        if (path !== REQUEST_CRAWL) return res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
        this.calls.push({ path, body: body ? JSON.parse(body) : undefined, at: Date.now() })
        const status = this.script.shift() ?? 200
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(status === 200 ? '{}' : JSON.stringify({ error: 'Busy', message: 'try later' }))
      })
    })
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()))
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
    return this
  }

  stop() {
    this.server.closeAllConnections()
    return new Promise((r) => this.server.close(r))
  }
}

/** waits up to `ms` for `cond`; its last value */
export async function until(cond: () => boolean, ms = 5000) {
  const end = Date.now() + ms
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 20))
  return cond()
}
