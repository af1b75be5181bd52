// Property-based fuzzing of every method id the server serves: parameters, bodies and headers
// generated from each method's lexicon (valid-shaped and malformed), anonymous, with junk
// credentials, with a real session and with admin Basic. The server must never answer 5xx, never
// hang, always answer 4xx as an XRPC error, and stay healthy (malformed CARs: fuzz-car.test.ts).
// Fixed seed and run count: PDS_FUZZ_SEED and PDS_FUZZ_RUNS (read only by the fuzz suites)
// explore further. Names resolve through a loopback nameserver that knows none, and outbound
// connections anywhere but loopback are refused and counted: the count must stay zero.
import { connect } from 'node:net'
import { gzipSync } from 'node:zlib'
import { Agent, buildConnector, getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from 'undici'
import fc from 'fast-check'
import WebSocket from 'ws'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, bearer, describe, newAccount, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { deepJson, junk, ascii, LexArbitraries, loadLexicon, servedMethods, type Pool } from './fuzz-lexicon.js'
import { startNameserver, type Nameserver } from './tripwire.js'
import { registry as methodRows, type Row } from '../src/auth/registry.js'

// looked up by arbitrary (fuzzed or listed) method ids
const registry: Record<string, Row> = methodRows

const SEED = Number(process.env.PDS_FUZZ_SEED ?? 20261125)
const RUNS = Number(process.env.PDS_FUZZ_RUNS ?? 25)
const TIMEOUT_MS = 5000
const STATS: Record<string, Record<string, number>> | undefined = process.env.PDS_FUZZ_STATS ? {} : undefined
const adminBasic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')

type Account = Awaited<ReturnType<typeof newAccount>>
type Call = { method: string; path: string; headers: Record<string, string>; body?: Buffer }

const LOOPBACK = new Set(['localhost', '127.0.0.1', '::1', '[::1]'])
const refused: string[] = []
let previous: Dispatcher

/** PDS_FUZZ_STATS=1: answers per method by status and error name (=msg: by message), printed at the end */
function count(path: string, status: number, text: string) {
  const detail = process.env.PDS_FUZZ_STATS === 'msg' ? text.slice(0, 100) : (/"error":"(\w+)"/.exec(text)?.[1] ?? '')
  const key = `${status} ${detail}`.trim()
  const row = (STATS![path] ??= {})
  row[key] = (row[key] ?? 0) + 1
}

/** what a response must look like whatever was sent */
async function send(url: string, call: Call) {
  let res: Response
  try {
    res = await fetch(url + call.path, {
      method: call.method,
      headers: call.headers,
      body: call.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') throw new Error(`no answer within ${TIMEOUT_MS} ms`, { cause: err })
    throw err
  }
  const text = await res.text()
  if (STATS) count(call.path.split('?')[0], res.status, text)
  if (res.status >= 500) throw new Error(`answered ${res.status}: ${text.slice(0, 300)}`)
  if (res.status >= 400) {
    let body: any
    try {
      body = JSON.parse(text)
    } catch {
      throw new Error(`answered ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`)
    }
    if (typeof body?.error !== 'string' || typeof body?.message !== 'string') {
      throw new Error(`answered ${res.status} without {error, message}: ${text.slice(0, 200)}`)
    }
  }
  return { status: res.status, text }
}

/** fast-check's report of a call: the request line, headers and the start of the body */
function described(call: Call): Call {
  const text = () => {
    const body = call.body ? ` body(${call.body.length} bytes)=${JSON.stringify(call.body.subarray(0, 300).toString('latin1'))}` : ''
    // tokens shortened: the seed and path above replay the case exactly
    const headers = JSON.stringify(call.headers).replace(/(eyJ[\w-]{8})[\w-]*\.[\w-]*\.[\w-]*/g, '$1…')
    return `${call.method} ${call.path.slice(0, 400)} headers=${headers.slice(0, 800)}${body}`
  }
  return Object.assign(call, { [fc.toStringMethod]: text })
}

/** a subscription: the upgrade is refused with a 4xx, or the stream opens and behaves until we leave */
function subscribe(url: string, call: Call): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + call.path, { headers: call.headers })
    const timer = setTimeout(() => {
      ws.terminate()
      reject(new Error(`no answer within ${TIMEOUT_MS} ms`))
    }, TIMEOUT_MS)
    const done = (err?: Error) => {
      clearTimeout(timer)
      ws.terminate()
      if (err) reject(err)
      else resolve()
    }
    ws.on('unexpected-response', (_req, res) => done(res.statusCode! >= 500 ? new Error(`upgrade answered ${res.statusCode}`) : undefined))
    // the first frame (or a quiet stream) is enough: the server took the parameters without failing
    ws.on('open', () => setTimeout(() => done(), 100))
    ws.on('message', () => done())
    ws.on('close', (code) => done(code === 1011 ? new Error('stream closed with 1011 (internal error)') : undefined))
    ws.on('error', (err) => done(/Unexpected server response/.test(err.message) ? undefined : err))
  })
}

// ---- request shapes ---------------------------------------------------------------------------

const b64url = (s: string) => Buffer.from(s).toString('base64url')
const fakeJwt = fc
  .tuple(
    fc.constantFrom('HS256', 'ES256K', 'none', 'RS256', ''),
    fc.constantFrom('at+jwt', 'refresh+jwt', 'com.atproto.access', 'dpop+jwt', 'JWT'),
    fc.record(
      {
        sub: fc.oneof(fc.constant('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'), ascii),
        scope: fc.constantFrom('com.atproto.access', 'com.atproto.refresh', 'atproto', 'com.atproto.appPassPrivileged'),
        exp: fc.integer(),
        aud: ascii,
      },
      { requiredKeys: [] },
    ),
    ascii,
  )
  .map(([alg, typ, payload, sig]) => `${b64url(JSON.stringify({ alg, typ }))}.${b64url(JSON.stringify(payload))}.${b64url(sig)}`)

/** an Authorization header (or none), weighted towards the ones that reach the handler */
function authFor(nsid: string, acct: Account): fc.Arbitrary<Record<string, string>> {
  const check = registry[nsid]?.check
  const real =
    check === 'admin' || check === 'moderator' ? adminBasic : check === 'refresh' ? `Bearer ${acct.refreshJwt}` : `Bearer ${acct.accessJwt}`
  const junkAuth = fc.oneof(
    ascii.map((s) => `Bearer ${s}`),
    fakeJwt.map((j) => `Bearer ${j}`),
    fc.tuple(fakeJwt, ascii).map(([j, p]) => `DPoP ${j}|${p}`),
    ascii.map((s) => `Basic ${Buffer.from(s, 'ascii').toString('base64')}`),
    ascii.map((s) => `Basic ${s}`),
    fc.constantFrom(
      'Bearer',
      'Bearer ',
      'Basic',
      'DPoP',
      '',
      'bearer x',
      `Basic ${Buffer.from('admin:').toString('base64')}`,
      `Basic ${Buffer.from(':' + ADMIN_PASSWORD).toString('base64')}`,
    ),
    fc.constant(`Bearer ${acct.refreshJwt}`),
    fc.constant(`DPoP ${acct.accessJwt}`),
    fc.constant(`${adminBasic}x`),
  )
  const headers = fc.record(
    {
      authorization: fc.oneof(
        { weight: 6, arbitrary: fc.constant(real) },
        { weight: 1, arbitrary: fc.constant(check === 'admin' || check === 'moderator' ? `Bearer ${acct.accessJwt}` : adminBasic) },
        { weight: 4, arbitrary: junkAuth },
      ),
      dpop: fc.oneof(fakeJwt, ascii),
      'atproto-proxy': fc.constantFrom(
        'did:web:invalid.invalid#x',
        'did:web:invalid.invalid#atproto_labeler',
        'junk',
        '#',
        'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa#atproto_pds',
        'did:web:a.test#bsky_appview',
      ),
      'atproto-accept-labelers': ascii,
      'accept-encoding': fc.constantFrom('gzip', 'br', 'identity;q=0', '*'),
    },
    { requiredKeys: [] },
  )
  return fc.oneof({ weight: 1, arbitrary: fc.constant({}) }, { weight: 6, arbitrary: headers })
}

/** a query string: the params serialized as xrpc clients do, or raw junk */
function queryString(params: unknown): string {
  const parts: string[] = []
  const enc = (s: string) => encodeURIComponent(s.toWellFormed())
  if (!params || typeof params !== 'object' || Array.isArray(params)) return `?p=${enc(String(params).slice(0, 2000))}`
  const add = (k: string, v: unknown) => {
    const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v))
    parts.push(`${enc(k.slice(0, 100))}=${enc(s.slice(0, 2000))}`)
  }
  for (const [k, v] of Object.entries(params)) {
    if (Array.isArray(v)) v.slice(0, 50).forEach((x) => add(k, x))
    else add(k, v)
  }
  return parts.length ? '?' + parts.join('&') : ''
}
const rawQuery = fc.constantFrom(
  '?%ZZ=%C0%80',
  '?did=%ED%A0%80',
  '?&&&=&',
  '?limit=1&limit=2&limit=x',
  '?cursor[]=1&cursor[a]=2',
  '?' + 'a=1&'.repeat(500),
  '?%00=%00',
)

const contentTypes = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/json; charset=ascii',
  'text/plain',
  'application/x-www-form-urlencoded',
  'application/cbor',
  'application/vnd.ipld.car',
  'multipart/form-data; boundary=x',
  '*/*',
  '',
  ';;;',
)
const rawBodies = fc.oneof(
  fc.constantFrom('{', '[', '', 'null', '"x"', '{"a":', '\ufeff{}', '{"__proto__":{"x":1}}', '{"a":1,"a":2}', '1e999999'),
  fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
  fc.string({ unit: 'binary', maxLength: 200 }),
  deepJson,
)

const sometimes = <T>(a: fc.Arbitrary<T>, oneIn = 8) =>
  fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a })

/** well-formed calls with the caller's real credentials (so the handler sees them), or junk anywhere */
function callFor(nsid: string, acct: Account, pool: Pool): fc.Arbitrary<Call> {
  return fc.oneof(cleanCall(nsid, acct, new LexArbitraries(pool, true)), fuzzedCall(nsid, acct, new LexArbitraries(pool)))
}

function cleanCall(nsid: string, acct: Account, lex: LexArbitraries): fc.Arbitrary<Call> {
  const def = loadLexicon(nsid).defs.main
  const check = registry[nsid]?.check
  const authorization =
    check === 'admin' || check === 'moderator' ? adminBasic : check === 'refresh' ? `Bearer ${acct.refreshJwt}` : `Bearer ${acct.accessJwt}`
  const auth: Record<string, string> = check === 'none' ? {} : { authorization }
  const path = `/xrpc/${nsid}`
  if (def.type !== 'procedure') {
    const params = def.parameters ? lex.value(def.parameters, nsid) : fc.constant({})
    return params.map((p) => described({ method: 'GET', path: path + queryString(p), headers: { ...auth } }))
  }
  const schema = def.input?.schema
  const encoding = def.input?.encoding
  const body: fc.Arbitrary<Buffer | undefined> = schema
    ? lex.value(schema, nsid).map((v) => Buffer.from(JSON.stringify(v)))
    : encoding
      ? fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b))
      : fc.constant(undefined)
  return body.map((b) => {
    const headers: Record<string, string> = { ...auth }
    if (b && encoding) headers['content-type'] = encoding.includes('*') ? 'application/octet-stream' : encoding
    return described({ method: 'POST', path, headers, body: b })
  })
}

function fuzzedCall(nsid: string, acct: Account, lex: LexArbitraries): fc.Arbitrary<Call> {
  const def = loadLexicon(nsid).defs.main
  const path = `/xrpc/${nsid}`
  const params = def.parameters ? lex.value(def.parameters, nsid) : fc.oneof(fc.constant({}), junk)
  const verb = def.type === 'procedure' ? 'POST' : 'GET'
  const otherVerb = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE')
  const query = fc.oneof({ weight: 6, arbitrary: params.map(queryString) }, { weight: 1, arbitrary: rawQuery })
  const schema = def.input?.schema
  const jsonBody = schema ? lex.value(schema, nsid) : junk
  const body = fc.oneof(
    {
      weight: 6,
      arbitrary: jsonBody.map((v) => ({
        text: JSON.stringify(v) ?? 'null',
        type: def.input?.encoding === 'application/json' ? 'application/json' : (undefined as string | undefined),
      })),
    },
    { weight: 2, arbitrary: fc.tuple(jsonBody, contentTypes).map(([v, type]) => ({ text: JSON.stringify(v) ?? '', type })) },
    { weight: 2, arbitrary: fc.tuple(rawBodies, sometimes(contentTypes, 2)).map(([b, type]) => ({ text: b, type })) },
  )
  return fc
    .tuple(
      fc.oneof({ weight: 9, arbitrary: fc.constant(verb) }, { weight: 1, arbitrary: otherVerb }),
      query,
      body,
      authFor(nsid, acct),
      sometimes(fc.constantFrom('gzip', 'deflate', 'br', 'junk', 'gzip, gzip'), 10),
    )
    .map(([method, q, b, auth, encoding]) => {
      const headers: Record<string, string> = { ...auth }
      let payload: Buffer | undefined
      if (method !== 'GET') {
        payload = Buffer.isBuffer(b.text) ? b.text : Buffer.from(b.text)
        if (b.type !== undefined) headers['content-type'] = b.type
        if (encoding) headers['content-encoding'] = encoding
      }
      return described({ method, path: path + (def.type === 'procedure' && method === 'POST' ? '' : q), headers, body: payload })
    })
}

// ---- the suite --------------------------------------------------------------------------------

describe('fuzzing every served method from its lexicon', () => {
  let pds: TestPds
  let ns: Nameserver
  let reader: Account
  let readerUri: string
  let readerCid: string

  beforeAll(async () => {
    previous = getGlobalDispatcher()
    const connect = buildConnector({})
    setGlobalDispatcher(
      new Agent({
        connect: (opts, cb) => {
          if (LOOPBACK.has(opts.hostname)) return connect(opts, cb)
          refused.push(opts.hostname)
          cb(new Error('fuzz: refused a connection beyond loopback'), null)
        },
      }),
    )
    // names resolve through a loopback nameserver that knows none: no lookup leaves the machine
    ns = await startNameserver({})
    pds = await startTestPds({ PDS_DNS_NAMESERVERS: ns.address })
    reader = await newAccount(pds.url, 'fzr')
    const created = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: bearer(reader.accessJwt),
      body: {
        repo: reader.did,
        collection: 'app.bsky.feed.post',
        record: { $type: 'app.bsky.feed.post', text: 'hello', createdAt: new Date().toISOString() },
      },
    })
    readerUri = created.body.uri
    readerCid = created.body.cid
  })

  afterAll(async () => {
    if (STATS) console.log(JSON.stringify(STATS, null, 1))
    await pds?.stop()
    await ns?.close()
    setGlobalDispatcher(previous)
  })

  const methods = servedMethods()

  methods.forEach((nsid, i) => {
    it(`${nsid} answers junk with a 4xx XRPC error, never a 5xx or a hang`, { timeout: 60_000 }, async () => {
      // each method gets an account of its own: deleteAccount, deactivateAccount and the admin
      // methods may well succeed on it
      const acct = await newAccount(pds.url, 'fz')
      const pool: Pool = {
        dids: [acct.did, ...(['admin', 'moderator'].includes(registry[nsid]?.check ?? '') ? [] : [reader.did])],
        handles: [acct.handle, ...(['admin', 'moderator'].includes(registry[nsid]?.check ?? '') ? [] : [reader.handle])],
        emails: [acct.email, 'nobody@example.com'],
        uris: [readerUri, `at://${acct.did}/app.bsky.feed.post/3aaaaaaaaaaaa`],
        cids: [readerCid],
      }
      const calls = callFor(nsid, acct, pool)
      const subscription = loadLexicon(nsid).defs.main.type === 'subscription'
      await fc.assert(
        fc.asyncProperty(calls, async (call) => {
          if (subscription) await subscribe(pds.url, { ...call, path: call.path.replace(/^\/xrpc\/[^?]*/, `/xrpc/${nsid}`) })
          else await send(pds.url, call)
        }),
        { seed: SEED + i, numRuns: RUNS, endOnFailure: true },
      )
    })
  })

  it('is still healthy afterwards and connected nowhere but loopback', async () => {
    expect((await fetch(`${pds.url}/xrpc/_health`)).status).toBe(200)
    const acct = await newAccount(pds.url, 'fzh')
    const session = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: PASSWORD } })
    expect(session.status).toBe(200)
    const created = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: bearer(session.body.accessJwt),
      body: {
        repo: acct.did,
        collection: 'app.bsky.feed.post',
        record: { $type: 'app.bsky.feed.post', text: 'still here', createdAt: new Date().toISOString() },
      },
    })
    expect(created.status).toBe(200)
    expect(refused).toEqual([])
  })
})

// inputs the fuzzing above once found answered with a 500 or left hanging, kept as plain cases
describe('inputs that once failed with a 500 or a hang', () => {
  let pds: TestPds
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(async () => {
    await pds?.stop()
  })

  it('uploadBlob with Content-Encoding gzip over bytes that are not gzip answers 400', async () => {
    const acct = await newAccount(pds.url, 'fzx')
    const res = await fetch(`${pds.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...bearer(acct.accessJwt), 'content-type': 'image/png', 'content-encoding': 'gzip' },
      body: Buffer.from('not gzip at all'),
    })
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({ error: 'InvalidRequest' })
    // and a real gzip upload still works
    const ok = await fetch(`${pds.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...bearer(acct.accessJwt), 'content-type': 'text/plain', 'content-encoding': 'gzip' },
      body: gzipSync(Buffer.from('hello')),
    })
    expect(ok.status).toBe(200)
    expect(((await ok.json()) as any).blob.size).toBe(5)
  })

  it('uploadBlob stores a JSON file as its bytes', async () => {
    const acct = await newAccount(pds.url, 'fzx')
    const json = '{"a":{"b":[1,2,3]},"c":"d"}'
    const res = await fetch(`${pds.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...bearer(acct.accessJwt), 'content-type': 'application/json' },
      body: json,
    })
    expect(res.status).toBe(200)
    const { blob } = (await res.json()) as any
    expect(blob).toMatchObject({ mimeType: 'application/json', size: json.length })
    const back = await fetch(`${pds.url}/xrpc/com.atproto.sync.getBlob?did=${acct.did}&cid=${blob.ref.$link}`)
    expect(await back.text()).toBe(json)
  })

  it('a NUL character in a parameter or a login identifier is never a 500 (PostgreSQL text cannot hold one)', async () => {
    // SQLite compares such a cursor like any other; PostgreSQL refuses the text: 400 there
    const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.listRepos?cursor=a%00b`)
    expect([200, 400]).toContain(res.status)
    if (res.status === 400) expect(await res.json()).toMatchObject({ error: 'InvalidRequest' })
    const login = await fetch(`${pds.url}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: 'a\u0000b.test', password: 'x' }),
    })
    expect(login.status).toBeGreaterThanOrEqual(400)
    expect(login.status).toBeLessThan(500)
  })

  it('a refused upload whose body was not read closes its connection instead of stalling the next request', async () => {
    const acct = await newAccount(pds.url, 'fzx')
    const body = Buffer.alloc(222_738, 0x5b)
    const head =
      `POST /xrpc/com.atproto.repo.uploadBlob HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${acct.accessJwt}\r\n` +
      `Content-Type: application/cbor\r\nContent-Encoding: deflate\r\nContent-Length: ${body.length}\r\n\r\n`
    const next = `GET /xrpc/_health HTTP/1.1\r\nHost: localhost\r\n\r\n`
    const sock = connect(Number(new URL(pds.url).port), '127.0.0.1')
    let got = ''
    sock.on('data', (d) => (got += d.toString('latin1')))
    sock.on('error', () => {})
    // the server's end of the connection (FIN) is enough: no client sends on after that
    let ended = false
    sock.on('end', () => (ended = true))
    // the body arrives in parts, the server refusing it after the first; then the next request
    // follows on the same connection, as a keep-alive client sends it
    sock.write(Buffer.concat([Buffer.from(head), body.subarray(0, 16_384)]))
    for (let i = 0; i < 50 && !got; i++) await new Promise((r) => setTimeout(r, 100))
    if (!sock.destroyed) sock.write(Buffer.concat([body.subarray(16_384), Buffer.from(next)]))
    for (let i = 0; i < 50 && !ended && !/HTTP\/1\.1 200/.test(got); i++) await new Promise((r) => setTimeout(r, 100))
    sock.destroy()
    expect(got).toMatch(/^HTTP\/1\.1 400[^]*connection: close/i)
    // answered then closed, or answered both: never left waiting
    expect(ended || /HTTP\/1\.1 200/.test(got)).toBe(true)
  })
})
