import { connect } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { bearer, describe, dialect, freePort, startTestPds, xrpc, type TestPds } from './harness.js'
import { sinkEnv, startMailSink } from './mail-sink.js'

function nested(depth: number): unknown {
  let v: unknown = 1
  for (let i = 0; i < depth; i++) v = [v]
  return v
}

describe('health, metrics and request limits', () => {
  let pds: TestPds
  let token: string
  beforeAll(async () => {
    pds = await startTestPds({ PDS_METRICS: 'true' }, { http: { headersTimeoutMs: 400, checkIntervalMs: 100 } })
    const res = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'ops.test', email: 'ops@example.com', password: 'hunter2hunter2' },
    })
    token = res.body.accessJwt
  })
  afterAll(() => pds?.stop())

  it('serves Prometheus metrics with request counts by method and status', async () => {
    await xrpc(pds.url, 'com.atproto.server.describeServer')
    await xrpc(pds.url, 'com.atproto.server.getSession')
    const res = await fetch(`${pds.url}/metrics`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/)
    const text = await res.text()
    expect(text).toMatch(/pds_xrpc_requests_total\{method="com.atproto.server.describeServer",status="200"\} [1-9]/)
    expect(text).toMatch(/pds_xrpc_requests_total\{method="com.atproto.server.getSession",status="401"\} 1/)
    expect(text).toMatch(/pds_xrpc_request_duration_seconds_bucket\{le="[^"]+",method="com.atproto.server.describeServer"\}/)
    expect(text).toMatch(/pds_firehose_consumers 0/)
    expect(text).toContain('pds_email_send_failures_total 0')
    expect(text).toContain('pds_process_')
    if (dialect === 'postgres') expect(text).toMatch(/pds_db_pool_total [1-9]/)
  })

  it('counts email the backend failed to send', async () => {
    const sink = await startMailSink()
    const mailing = await startTestPds({ PDS_METRICS: 'true', ...sinkEnv(sink) })
    try {
      sink.mode = 'fail'
      const acct = await xrpc(mailing.url, 'com.atproto.server.createAccount', {
        body: { handle: 'mailfail.test', email: 'mailfail@example.com', password: 'hunter2hunter2' },
      })
      const res = await xrpc(mailing.url, 'com.atproto.server.requestEmailConfirmation', {
        method: 'POST',
        headers: bearer(acct.body.accessJwt),
      })
      expect(res.status).toBeGreaterThanOrEqual(500)
      const text = await (await fetch(`${mailing.url}/metrics`)).text()
      expect(text).toContain('pds_email_send_failures_total 1')
    } finally {
      await mailing.stop()
      await sink.close()
    }
  })

  it('labels unknown method ids as one, so clients cannot grow the metrics', async () => {
    await xrpc(pds.url, 'com.example.random.one')
    await xrpc(pds.url, 'com.example.random.two')
    const text = await (await fetch(`${pds.url}/metrics`)).text()
    expect(text).not.toContain('com.example.random')
    expect(text).toMatch(/pds_xrpc_requests_total\{method="other",status="501"\} 2/)
  })

  it('counts live firehose consumers', async () => {
    const ws = new WebSocket(`${pds.url.replace('http', 'ws')}/xrpc/com.atproto.sync.subscribeRepos`)
    await new Promise((r, j) => ws.once('open', r).once('error', j))
    await new Promise((r) => setTimeout(r, 100))
    const text = await (await fetch(`${pds.url}/metrics`)).text()
    expect(text).toMatch(/pds_firehose_consumers 1/)
    ws.close()
  })

  it('closes a firehose connection that sends an oversized frame', async () => {
    const ws = new WebSocket(`${pds.url.replace('http', 'ws')}/xrpc/com.atproto.sync.subscribeRepos`)
    await new Promise((r, j) => ws.once('open', r).once('error', j))
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)))
    ws.send(Buffer.alloc(64 * 1024))
    expect(await closed).toBe(1009)
  })

  it('refuses JSON nested deeper than 64 levels with InvalidRequest, and takes ordinary nesting', async () => {
    const deep = await xrpc(pds.url, 'app.bsky.actor.putPreferences', {
      body: { preferences: [{ $type: 'app.bsky.actor.defs#adultContentPref', enabled: true, x: nested(100) }] },
      headers: bearer(token),
    })
    expect(deep.status).toBe(400)
    expect(deep.body.error).toBe('InvalidRequest')
    expect(deep.body.message).toMatch(/deeper/)
    const fine = await xrpc(pds.url, 'app.bsky.actor.putPreferences', {
      body: { preferences: [{ $type: 'app.bsky.actor.defs#adultContentPref', enabled: true, x: nested(10) }] },
      headers: bearer(token),
    })
    expect(fine.status).toBe(200)
  })

  it('applies the depth cap to every spelling of a path the router serves', async () => {
    const record = { $type: 'app.bsky.feed.post', text: 'deep', createdAt: new Date().toISOString(), x: nested(500) }
    const body = JSON.stringify({ repo: 'ops.test', collection: 'app.bsky.feed.post', record })
    for (const path of ['com.atproto.repo.createRecord/', 'COM.ATPROTO.REPO.CREATERECORD', 'com.atproto.repo.CreateRecord/']) {
      for (const prefix of ['/xrpc/', '/XRPC/']) {
        const res = await fetch(`${pds.url}${prefix}${path}`, {
          method: 'POST',
          headers: { ...bearer(token), 'content-type': 'application/json' },
          body,
        })
        const status = res.status
        const text = await res.text()
        // refused by the cap, or not served at all; never stored
        expect(status === 400 ? text : String(status), `${prefix}${path}`).toMatch(/deeper|^40[45]$|^501$/)
      }
    }
    const list = await xrpc(pds.url, 'com.atproto.repo.listRecords', { params: { repo: 'ops.test', collection: 'app.bsky.feed.post' } })
    expect(list.body.records).toEqual([])
  })

  it('refuses a JSON body over 1 MiB with 413 PayloadTooLarge', async () => {
    const res = await xrpc(pds.url, 'app.bsky.actor.putPreferences', {
      body: { preferences: [{ $type: 'app.bsky.actor.defs#adultContentPref', pad: 'x'.repeat(1100 * 1024) }] },
      headers: bearer(token),
    })
    expect(res.status).toBe(413)
    expect(res.body.error).toBe('PayloadTooLarge')
  })

  it('refuses request headers over 16 KiB with 431', async () => {
    const res = await fetch(`${pds.url}/xrpc/_health`, { headers: { 'x-big': 'a'.repeat(20 * 1024) } })
    expect(res.status).toBe(431)
  })

  it('drops a client that never finishes its headers (slowloris)', async () => {
    const started = Date.now()
    const socket = connect(pds.port, '127.0.0.1')
    await new Promise((r) => socket.once('connect', r))
    socket.write('GET /xrpc/_health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ')
    const timer = setInterval(() => socket.write('a'), 50)
    let response = ''
    socket.on('data', (d) => (response += d))
    await new Promise((r) => {
      socket.once('close', r)
      setTimeout(r, 5000)
    })
    clearInterval(timer)
    expect(socket.destroyed || socket.readableEnded).toBe(true)
    expect(Date.now() - started).toBeLessThan(3000)
    if (response) expect(response).toMatch(/^HTTP\/1.1 408/)
  })
})

describe('health checks', () => {
  it('answers _health 503 when the database is unreachable', async () => {
    const pds = await startTestPds()
    expect((await fetch(`${pds.url}/xrpc/_health`)).status).toBe(200)
    const db = pds.services.db
    const destroy = db.destroy.bind(db)
    await destroy()
    // the server's own shutdown closes it again: once is enough
    db.destroy = async () => {}
    const res = await fetch(`${pds.url}/xrpc/_health`)
    expect(res.status).toBe(503)
    expect(((await res.json()) as any).error).toBe('ServiceUnavailable')
    await pds.stop()
  })

  it('serves no /metrics unless asked to, and can serve them on a port of their own', async () => {
    const off = await startTestPds()
    expect((await fetch(`${off.url}/metrics`)).status).toBe(404)
    await off.stop()
    const port = await freePort()
    const own = await startTestPds({ PDS_METRICS_PORT: String(port) })
    expect((await fetch(`${own.url}/metrics`)).status).toBe(404)
    const res = await fetch(`http://127.0.0.1:${port}/metrics`)
    expect(res.status).toBe(200)
    expect(await res.text()).toContain('pds_xrpc_requests_total')
    await own.stop()
  })
})
