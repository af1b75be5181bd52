// The network's real services for the tests (test/network.ts starts this as a child process): the
// Bluesky AppView (@atproto/bsky: its API server, its dataplane and the firehose ingester) and,
// on request, the Ozone moderation service (@atproto/ozone), wired as the reference's dev-env
// wires them, on the PostgreSQL the tests use, resolving DIDs through the tests' PLC directory.
//
// Configuration: one JSON object in NETWORK_CONFIG:
//   { plcUrl, dbUrl, appview: { port, schema, keyHex }, ozone: { port, schema, keyHex },
//     handleDomains: ['.test'], controlPort }
// Prints `READY <json>` ({ appview: {url, did}, ozone: {url, did} }) once the AppView serves;
// Ozone's identity exists from the start (the AppView trusts it), Ozone itself starts when asked.
// A control server on 127.0.0.1:<controlPort> answers the tests:
//   POST /ingest {pdsUrl}          subscribe the ingester to that server's firehose
//   GET  /cursor                   {cursor}: the last firehose seq the AppView has indexed
//   POST /ingester/hold, /release  hold back indexing (events wait) / let it go on
//   POST /ozone/start {pdsUrl, pdsDid}, POST /ozone/team {did, role}, GET /ozone/headers?lxm&role,
//   POST /ozone/process            start Ozone, add a team member, a moderator's service token,
//                                  run Ozone's queues (events pushed to the PDS and AppView) now
// SIGTERM/SIGINT stop everything.
import http from 'node:http'
import * as bsky from '@atproto/bsky'
import * as ozone from '@atproto/ozone'
import { Secp256k1Keypair } from '@atproto/crypto'
import { createServiceJwt } from '@atproto/xrpc-server'
import * as plc from '@did-plc/lib'
import * as ui8 from 'uint8arrays'

const cfg = JSON.parse(process.env.NETWORK_CONFIG ?? '{}')
const ADMIN_PASSWORD = 'network-admin-password'
const plcClient = new plc.Client(cfg.plcUrl)

/** a did:plc with the given verification methods and services, its rotation key `key` */
async function createDid(key, { handle, verificationMethods, services }) {
  const op = await plc.signOperation(
    {
      type: 'plc_operation',
      alsoKnownAs: handle ? [`at://${handle}`] : [],
      rotationKeys: [key.did()],
      verificationMethods,
      services,
      prev: null,
    },
    key,
  )
  const did = await plc.didForCreateOp(op)
  await plcClient.sendOperation(did, op)
  return did
}

// Handles under the test server's domains exist only on that server (no DNS): they are resolved
// at its /.well-known/atproto-did with the handle as Host, as a resolver on the network would.
let pdsUrl
function resolveHandleAtPds(handle) {
  return new Promise((resolve) => {
    const url = new URL('/.well-known/atproto-did', pdsUrl)
    const req = http.get(url, { headers: { host: handle }, timeout: 3000 }, (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => {
        const did = body.split('\n')[0].trim()
        resolve(res.statusCode === 200 && did.startsWith('did:') ? did : undefined)
      })
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolve(undefined))
  })
}
function patchHandles(idResolver) {
  const original = idResolver.handle.resolve.bind(idResolver.handle)
  idResolver.handle.resolve = async (handle) => {
    if (pdsUrl && (cfg.handleDomains ?? []).some((d) => handle.endsWith(d))) return resolveHandleAtPds(handle)
    return original(handle)
  }
}

// identities: the AppView (#atproto key, #bsky_appview and #bsky_notif services) and Ozone
// (#atproto_label key, #atproto_labeler service), before anything starts
const appviewKey = await Secp256k1Keypair.import(cfg.appview.keyHex)
const appviewUrl = `http://localhost:${cfg.appview.port}`
const appviewDid = await createDid(appviewKey, {
  handle: 'appview.test',
  verificationMethods: { atproto: appviewKey.did() },
  services: {
    atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: appviewUrl },
    bsky_appview: { type: 'BskyAppView', endpoint: appviewUrl },
    bsky_notif: { type: 'BskyNotificationService', endpoint: appviewUrl },
  },
})
const ozoneKey = await Secp256k1Keypair.import(cfg.ozone.keyHex, { exportable: true })
const ozoneUrl = `http://localhost:${cfg.ozone.port}`
const ozoneDid = await createDid(ozoneKey, {
  verificationMethods: { atproto: ozoneKey.did(), atproto_label: ozoneKey.did() },
  services: { atproto_labeler: { type: 'AtprotoLabeler', endpoint: ozoneUrl } },
})

// the AppView: one pool shared by the server, dataplane and ingester, as dev-env does
const db = new bsky.Database({ url: cfg.dbUrl, schema: cfg.appview.schema, poolSize: 10 })
const migrationDb = new bsky.Database({ url: cfg.dbUrl, schema: cfg.appview.schema })
await migrationDb.migrateToLatestOrThrow()
await migrationDb.close()
const dataplanePort = await freeLoopbackPort()
const dataplane = await bsky.DataPlaneServer.create(db, dataplanePort, cfg.plcUrl, globalThis.fetch)
patchHandles(dataplane.idResolver)
const config = new bsky.ServerConfig({
  version: 'test',
  port: cfg.appview.port,
  didPlcUrl: cfg.plcUrl,
  publicUrl: appviewUrl,
  serverDid: appviewDid,
  alternateAudienceDids: [],
  dataplaneUrls: [`http://localhost:${dataplanePort}`],
  dataplaneHttpVersion: '1.1',
  bsyncUrl: 'http://127.0.0.1:1', // mutes and notification preferences: not run here
  bsyncHttpVersion: '1.1',
  bsyncApiKey: 'unused',
  modServiceDid: ozoneDid,
  labelsFromIssuerDids: [ozoneDid],
  bigThreadUris: new Set(),
  maxThreadParents: 50,
  disableSsrfProtection: true,
  searchTagsHide: new Set(),
  searchTagsHideAll: new Set(),
  threadTagsBumpDown: new Set(),
  threadTagsHide: new Set(),
  visibilityTagHide: '',
  visibilityTagRankPrefix: '',
  debugFieldAllowedDids: new Set(),
  draftsLimit: 500,
  feedGenSkeletonTimeout: 5000,
  adminPasswords: [ADMIN_PASSWORD],
  etcdHosts: [],
})
const server = bsky.BskyAppView.create({ config, signingKey: appviewKey })
patchHandles(server.ctx.idResolver)
await server.start()

// the ingester, and a gate that holds indexing back while a test wants the AppView behind
let sub
let gate = null
function holdable(indexingSvc) {
  for (const name of ['indexRecord', 'deleteRecord', 'indexHandle', 'updateActorStatus', 'deleteActor', 'setCommitLastSeen']) {
    const original = indexingSvc[name].bind(indexingSvc)
    indexingSvc[name] = async (...args) => {
      while (gate) await gate.promise
      return original(...args)
    }
  }
}

let ozoneService
let ozoneDaemon
const ozoneTeam = {}

async function startOzone({ pdsUrl: ozonePdsUrl, pdsDid }) {
  if (ozoneService) return
  for (const role of ['admin', 'moderator', 'triage']) {
    const key = await Secp256k1Keypair.create()
    const did = await createDid(key, {
      handle: `${role}.ozone.test`,
      verificationMethods: { atproto: key.did() },
      services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: 'https://pds.invalid' } },
    })
    ozoneTeam[role] = { did, key }
  }
  const migrate = new ozone.Database({ url: cfg.dbUrl, schema: cfg.ozone.schema })
  await migrate.migrateToLatestOrThrow()
  await migrate.close()
  const env = {
    devMode: true,
    version: '0.0.0',
    port: cfg.ozone.port,
    publicUrl: ozoneUrl,
    serverDid: ozoneDid,
    signingKeyHex: ui8.toString(await ozoneKey.export(), 'hex'),
    didPlcUrl: cfg.plcUrl,
    dbPostgresUrl: cfg.dbUrl,
    dbPostgresSchema: cfg.ozone.schema,
    appviewUrl,
    appviewDid,
    appviewPushEvents: true,
    pdsUrl: ozonePdsUrl,
    pdsDid,
    adminPassword: ADMIN_PASSWORD,
    adminDids: [ozoneTeam.admin.did, ozoneDid],
    moderatorDids: [ozoneTeam.moderator.did, appviewDid],
    triageDids: [ozoneTeam.triage.did],
  }
  const ozoneCfg = ozone.envToCfg(env)
  const secrets = ozone.envToSecrets(env)
  ozoneService = await ozone.OzoneService.create(ozoneCfg, secrets)
  await ozoneService.start()
  ozoneDaemon = await ozone.OzoneDaemon.create(ozoneCfg, secrets)
  await ozoneDaemon.start()
  // reversal of expired actions runs on a timer: tests reverse explicitly
  await ozoneDaemon.ctx.eventReverser.destroy()
}

const roles = {
  admin: 'tools.ozone.team.defs#roleAdmin',
  moderator: 'tools.ozone.team.defs#roleModerator',
  triage: 'tools.ozone.team.defs#roleTriage',
}

const control = http.createServer(async (req, res) => {
  const reply = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body ?? {}))
  }
  try {
    let body = ''
    for await (const chunk of req) body += chunk
    const input = body ? JSON.parse(body) : {}
    const url = new URL(req.url, 'http://control')
    switch (`${req.method} ${url.pathname}`) {
      case 'POST /ingest':
        if (!sub) {
          pdsUrl = input.pdsUrl
          sub = new bsky.RepoSubscription({
            service: input.pdsUrl.replace(/^http/, 'ws'),
            db,
            idResolver: dataplane.idResolver,
          })
          holdable(sub.indexingSvc)
          void sub.start()
        }
        return reply(200)
      case 'GET /cursor':
        return reply(200, { cursor: sub?.getCursor() ?? 0 })
      case 'POST /ingester/hold':
        if (!gate) {
          let release
          const promise = new Promise((r) => (release = r))
          gate = { promise, release }
        }
        return reply(200)
      case 'POST /ingester/release':
        if (gate) {
          const { release } = gate
          gate = null
          release()
        }
        return reply(200)
      case 'POST /ozone/start':
        await startOzone(input)
        return reply(200, { url: ozoneUrl, did: ozoneDid })
      case 'POST /ozone/team': {
        const ctx = ozoneService.ctx
        await ctx.teamService(ctx.db).create({
          did: input.did,
          disabled: false,
          handle: null,
          displayName: null,
          lastUpdatedBy: ozoneDid,
          role: roles[input.role],
        })
        const list = { admin: ctx.cfg.access.admins, moderator: ctx.cfg.access.moderators, triage: ctx.cfg.access.triage }[input.role]
        list.push(input.did)
        return reply(200)
      }
      case 'GET /ozone/headers': {
        const member = ozoneTeam[url.searchParams.get('role') ?? 'moderator']
        const jwt = await createServiceJwt({ iss: member.did, aud: ozoneDid, lxm: url.searchParams.get('lxm'), keypair: member.key })
        return reply(200, { authorization: `Bearer ${jwt}` })
      }
      case 'POST /ozone/process':
        await ozoneService.ctx.backgroundQueue.processAll()
        await ozoneDaemon.processAll()
        return reply(200)
      default:
        return reply(404, { error: 'NotFound' })
    }
  } catch (err) {
    reply(500, { error: 'HarnessError', message: String(err?.stack ?? err) })
  }
})
await new Promise((resolve) => control.listen(cfg.controlPort, '127.0.0.1', resolve))

process.stdout.write(`READY ${JSON.stringify({ appview: { url: appviewUrl, did: appviewDid }, ozone: { url: ozoneUrl, did: ozoneDid } })}\n`)

function freeLoopbackPort() {
  return new Promise((resolve, reject) => {
    const s = http.createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
    s.once('error', reject)
  })
}

let stopping = false
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    setTimeout(() => process.exit(0), 4000).unref()
    gate?.release()
    gate = null
    const steps = [
      () => control.close(),
      () => ozoneService?.destroy(),
      () => ozoneDaemon?.destroy(),
      () => server.destroy(),
      () => sub?.destroy(),
      () => dataplane.destroy(),
      () => db.close(),
    ]
    ;(async () => {
      for (const step of steps) await Promise.resolve().then(step).catch(() => {})
      process.exit(0)
    })()
  })
}
