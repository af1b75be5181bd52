// Guards for src/patches/: each patch relies on library internals that no semver range promises,
// so these fail when an upgrade changes them (then re-check the patch against the new code and
// update it, the pin in package.json and these tests together). The @atproto/repo patches'
// output is compared byte for byte with the unpatched library in repo-encoding.nodb.test.ts.
import { readFileSync } from 'node:fs'
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { createServer as createXrpcServer, type Server as XrpcServer } from '@atproto/xrpc-server'
import type { LexiconDoc } from '@atproto/lexicon'
import { BlockMap, CidSet } from '@atproto/repo'
import { WebSocket, WebSocketServer } from 'ws'
import { afterEach, expect, it } from 'vitest'
import { capStreamFrames, exactXrpcRoutes, skipAuthResultParsing, streamServers } from '../src/patches/xrpc-server.js'
import { blockEntries, cidStrings, installRepoPatches, libraryMatches } from '../src/patches/repo.js'
import { assertValidJsonText, jsonText } from '../src/api/json-text.js'
import { describe } from './harness.js'

const pkg = (path: string) => JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8'))

describe('patched libraries', () => {
  it('are pinned to exactly the versions installed', () => {
    const deps = pkg('../package.json').dependencies
    for (const name of ['@atproto/xrpc-server', '@atproto/repo', 'ws']) {
      expect(deps[name], name).toMatch(/^\d+\.\d+\.\d+$/)
      expect(pkg(`../node_modules/${name}/package.json`).version, name).toBe(deps[name])
    }
  })
})

const lexicons: LexiconDoc[] = [
  {
    lexicon: 1,
    id: 'io.example.get',
    defs: {
      main: {
        type: 'query',
        parameters: { type: 'params', properties: { n: { type: 'integer', maximum: 100 }, flag: { type: 'boolean' } } },
        output: {
          encoding: 'application/json',
          schema: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } },
        },
      },
    },
  },
  {
    lexicon: 1,
    id: 'io.example.post',
    defs: {
      main: { type: 'procedure', output: { encoding: 'application/json', schema: { type: 'object', properties: {} } } },
    },
  },
  {
    lexicon: 1,
    id: 'io.example.stream',
    defs: { main: { type: 'subscription', message: { schema: { type: 'union', refs: [] } } } },
  },
]

const servers: HttpServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))))
})

async function serve(handler: express.RequestHandler): Promise<string> {
  const app = express()
  app.use(handler)
  const http = createHttpServer(app)
  servers.push(http)
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r))
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}`
}

describe('xrpc-server patches', () => {
  it('keeps the internals the patches replace, with the shapes they expect', () => {
    const xrpc: XrpcServer = createXrpcServer(lexicons)
    expect(typeof xrpc['addRoute']).toBe('function')
    expect(xrpc['addRoute'].length).toBe(3)
    expect(typeof xrpc['createAuthVerifier']).toBe('function')
    expect(typeof xrpc['createLexiconParamsVerifier']).toBe('function')
    expect(xrpc['createLexiconParamsVerifier'].length).toBe(2)
    expect(typeof xrpc.createHandler).toBe('function')
    expect(typeof xrpc.routes).toBe('function')
    expect(xrpc.subscriptions).toBeInstanceOf(Map)
    // method() registers through addRoute; createHandler asks for the auth and params verifiers
    const seen: string[] = []
    const addRoute = xrpc['addRoute'].bind(xrpc)
    const spied: typeof addRoute = (nsid, def, cfg) => {
      seen.push(`route ${nsid}`)
      return addRoute(nsid, def, cfg)
    }
    xrpc['addRoute'] = spied
    const authVerifier = xrpc['createAuthVerifier'].bind(xrpc)
    xrpc['createAuthVerifier'] = (cfg: unknown) => (seen.push('auth'), authVerifier(cfg))
    const paramsVerifier = xrpc['createLexiconParamsVerifier'].bind(xrpc)
    xrpc['createLexiconParamsVerifier'] = (nsid: string, def: unknown) => {
      seen.push(`params ${nsid}`)
      return paramsVerifier(nsid, def)
    }
    xrpc.method('io.example.get', () => ({ encoding: 'application/json', body: { n: 1 } }))
    expect(seen).toEqual(['route io.example.get', 'auth', 'params io.example.get'])
  })

  it('answers by exact path, falls back to the router, and checks parameters without stack traces', async () => {
    const xrpc = createXrpcServer(lexicons)
    const checked: string[] = []
    const routes = exactXrpcRoutes(xrpc, { checkOutput: (nsid) => checked.push(nsid) })
    let stackLimit: number | undefined
    xrpc.method('io.example.get', (ctx: { params: { n?: number } }) => {
      stackLimit = Error.stackTraceLimit
      return { encoding: 'application/json', body: { n: ctx.params.n ?? 0 } }
    })
    xrpc.method('io.example.post', () => ({ encoding: 'application/json', body: {} }))
    const url = await serve(routes)
    expect(await (await fetch(`${url}/xrpc/io.example.get?n=4`)).json()).toEqual({ n: 4 })
    expect(stackLimit).not.toBe(0)
    // another letter case is not in the map: the library's router still answers it
    expect((await fetch(`${url}/xrpc/IO.EXAMPLE.GET?n=5`)).status).toBe(200)
    expect((await fetch(`${url}/xrpc/io.example.post`, { method: 'POST' })).status).toBe(200)
    const bad = await fetch(`${url}/xrpc/io.example.get?n=1000`)
    expect(bad.status).toBe(400)
    // every output but the refused request's, whichever route answered
    expect(checked).toEqual(['io.example.get', 'io.example.get', 'io.example.post'])
    // the params check runs with stack traces off, and turns them back on after
    let limitInCheck: number | undefined
    const xrpc2 = createXrpcServer(lexicons)
    const original = xrpc2['createLexiconParamsVerifier'].bind(xrpc2)
    xrpc2['createLexiconParamsVerifier'] = (nsid: string, def: unknown) => {
      const verify = original(nsid, def)
      return (req: unknown) => ((limitInCheck = Error.stackTraceLimit), verify(req))
    }
    const routes2 = exactXrpcRoutes(xrpc2)
    xrpc2.method('io.example.get', () => ({ encoding: 'application/json', body: { n: 0 } }))
    const url2 = await serve(routes2)
    expect((await fetch(`${url2}/xrpc/io.example.get?flag=true`)).status).toBe(200)
    expect(limitInCheck).toBe(0)
    expect(Error.stackTraceLimit).not.toBe(0)
  })

  it('hands auth results through unparsed', async () => {
    const xrpc = createXrpcServer(lexicons)
    skipAuthResultParsing(xrpc)
    const auth = async () => ({ credentials: { who: 'me' }, extra: 1 })
    expect(xrpc['createAuthVerifier']({ auth })).toBe(auth)
    expect(xrpc['createAuthVerifier']({})).toBe(null)
    xrpc.method('io.example.get', {
      auth,
      handler: (ctx: { auth: { credentials: { who: string } } }) => ({
        encoding: 'application/json',
        body: { n: ctx.auth.credentials.who === 'me' ? 1 : 0 },
      }),
    })
    const url = await serve(xrpc.routes)
    expect(await (await fetch(`${url}/xrpc/io.example.get`)).json()).toEqual({ n: 1 })
  })

  it("keeps each subscription's WebSocket server for our listener to route upgrades to", () => {
    const xrpc = createXrpcServer(lexicons)
    xrpc.streamMethod('io.example.stream', async function* () {})
    const sub = streamServers(xrpc).get('io.example.stream')
    expect(sub?.wss).toBeInstanceOf(WebSocketServer)
    expect(sub?.wss.options.noServer).toBe(true)
  })

  it('caps the frames a subscriber may send on servers the library already made', async () => {
    const xrpc = createXrpcServer(lexicons)
    // eslint-disable-next-line require-yield -- a stream that sends no frame and waits for the close
    xrpc.streamMethod('io.example.stream', async function* ({ signal }: { signal: AbortSignal }) {
      await new Promise((r) => signal.addEventListener('abort', r))
    })
    capStreamFrames(xrpc, 64)
    const http = createHttpServer()
    servers.push(http)
    http.on('upgrade', (req, socket, head) => {
      const { wss } = streamServers(xrpc).get('io.example.stream')!
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req))
    })
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r))
    const ws = new WebSocket(`ws://127.0.0.1:${(http.address() as AddressInfo).port}/xrpc/io.example.stream`)
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)))
    ws.on('error', () => {})
    await new Promise((r) => ws.once('open', r))
    ws.send('x'.repeat(65))
    const code = await Promise.race([closed, new Promise((r) => setTimeout(() => r('timeout'), 5000))])
    expect(code).toBe(1009)
  })

  it('sends JSON text as the bytes given, before any body handling', async () => {
    const xrpc = createXrpcServer(lexicons)
    const text = '{"n":3,  "spacing":"kept"}'
    xrpc.method('io.example.get', () => jsonText<{ n: number }>(text))
    const url = await serve(xrpc.routes)
    const res = await fetch(`${url}/xrpc/io.example.get`)
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    expect(await res.text()).toBe(text)
    expect(() => assertValidJsonText(xrpc.lex, 'io.example.get', jsonText('{"n":"x"}'))).toThrow()
  })
})

describe('@atproto/repo patches', () => {
  it('finds the private block and CID maps the patches read, keyed by CID string', async () => {
    expect(libraryMatches()).toBe(true)
    expect(installRepoPatches()).toBe(true)
    const blocks = new BlockMap()
    const cid = await blocks.add({ hello: 'world' })
    expect([...blockEntries(blocks).keys()]).toEqual([cid.toString()])
    const set = new CidSet([cid])
    expect(cidStrings(set)).toEqual([cid.toString()])
  })
})
