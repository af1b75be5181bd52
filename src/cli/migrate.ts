// `pds migrate`: moves one account between two servers, over XRPC only. The flow in which the
// destination reserves the key (requestAccountMigrate, reserveSigningKey, createAccount with plcOp,
// `--flow spec`) when both servers serve it, else the standard atproto migration (getServiceAuth,
// createAccount with a service-auth token, submitPlcOperation). Every step first checks whether it
// is already done (a session on the destination, checkAccountStatus, listMissingBlobs, the DID
// document), so running the command again after an interruption continues where it stopped.
// With an export (`pds account export`, or the account page's download) the repository, blobs and
// preferences come from it instead of the origin; without an origin the account must already
// exist on the destination, and the export is imported into it.
//
// Permissioned repos (Spaces) have no import method anywhere yet, so a move cannot carry them:
// the command saves each one (its CAR and blobs) from the origin into a directory, says so, and
// leaves them on the origin, where the deactivated account still reads its own. The spaces the
// account governs are created again on the destination with their policies and member lists.
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { verifyRepoCar } from '@atproto/repo'
import { x as untar } from 'tar'
import { BLOB_DIR, EXPORT_FORMAT, MANIFEST_FILE, SPACE_DIR, type ExportManifest } from '../account/export.js'
import { bar, kb, MigrateError, plcMode, Xrpc, type MigrateIo } from './migrate-xrpc.js'
import { defaultSpacesDir, recreateSpaces, saveSpaces, type SavedSpaces } from './migrate-spaces.js'

export { MigrateError, type MigrateIo } from './migrate-xrpc.js'
export { SPACES_FILE } from './migrate-spaces.js'

export type MigrateOptions = {
  /** the origin; without it, `fromExport` is imported into an account already on `to` */
  from?: string
  to: string
  handle: string
  password: string
  newHandle?: string
  email?: string
  inviteCode?: string
  plcToken?: string
  /** where did:plc documents are read for the final check */
  plcUrl: string
  /** force a flow instead of probing */
  flow?: 'spec' | 'standard'
  /** the data comes from this export (opened with `openExport`) rather than from the origin */
  fromExport?: ExportSource
  /** where the permissioned repos are saved (default: `spaces-<did>` in the working directory) */
  spacesDir?: string
}

export type MigrateSummary = {
  did: string
  flow: 'spec' | 'standard'
  resumed: boolean
  records: { origin: number; destination: number }
  blobs: { origin: number; destination: number; uploaded: number; bytes: number }
  signature: { valid: boolean; key: string }
  active: boolean
  /** permissioned repos saved (where), and governed spaces created again on the destination */
  spaces: { repos: number; savedTo?: string; governed: number; recreated: number }
}

export async function runMigration(opts: MigrateOptions, io: MigrateIo): Promise<MigrateSummary> {
  if (!opts.from) {
    if (!opts.fromExport) throw new MigrateError('a migration needs an origin or an export')
    return importExport({ ...opts, fromExport: opts.fromExport }, io)
  }
  const origin = new Xrpc(opts.from.replace(/\/+$/, ''))
  const dest = new Xrpc(opts.to.replace(/\/+$/, ''))
  const step = (n: number, text: string) => io.log(`[${n}/9] ${text}`)
  const checkAbort = () => {
    if (io.signal?.aborted) throw new MigrateError('interrupted; run the same command again to continue')
  }

  // before anything is signed: a DID kept in one server's own log cannot be followed by the other
  for (const side of [origin, dest]) {
    if ((await plcMode(side)) === 'local') {
      throw new MigrateError(
        `${side.url} keeps DIDs in its own local log, not a PLC directory, so the other server cannot verify the move; give both servers PDS_DID_PLC_URL`,
      )
    }
  }

  step(1, `logging in on ${origin.url} as ${opts.handle}`)
  const login = await origin.call('com.atproto.server.createSession', { body: { identifier: opts.handle, password: opts.password } })
  if (login.status !== 200) throw new MigrateError(`login on ${origin.url} failed: ${login.json?.message ?? login.status}`)
  const did: string = login.json.did
  origin.token = login.json.accessJwt
  if (opts.fromExport && opts.fromExport.manifest.did !== did) {
    throw new MigrateError(`the export at ${opts.fromExport.path} is of ${opts.fromExport.manifest.did}, not of ${did}`)
  }
  const handle = opts.newHandle ?? login.json.handle
  const email = opts.email ?? login.json.email
  const destDescribe = (await dest.ok('com.atproto.server.describeServer')).json
  const destDid: string = destDescribe.did
  const destEndpoint = await serviceEndpoint(dest.url)
  let flow = opts.flow
  if (!flow) {
    const spec =
      (await origin.serves('com.atproto.server.requestAccountMigrate', true)) &&
      (await dest.serves('com.atproto.sync.listMissingBlobs', false))
    flow = spec ? 'spec' : 'standard'
  }
  io.log(
    `      ${did}: ${flow === 'spec' ? 'both servers serve the reserved-key migration flow (--flow spec)' : 'standard atproto migration'}`,
  )
  const originStatus = (await origin.ok('com.atproto.server.checkAccountStatus')).json
  // a deactivated origin (a rerun after the last steps) no longer lists its blobs
  const originBlobs = (await countBlobs(origin, did).catch(() => undefined)) ?? originStatus.expectedBlobs

  step(2, `account on ${dest.url}`)
  let resumed = false
  let migrationToken: string | undefined
  const destLogin = await dest.call('com.atproto.server.createSession', { body: { identifier: did, password: opts.password } })
  if (destLogin.status === 200) {
    resumed = true
    dest.token = destLogin.json.accessJwt
    io.log('      already created there: resuming')
  } else if (flow === 'spec') {
    const mig = (await origin.ok('com.atproto.server.requestAccountMigrate', { body: { to: dest.url } })).json
    migrationToken = mig.token
    const reserved = (await dest.ok('com.atproto.server.reserveSigningKey', { body: { did } })).json
    const token = await plcToken(origin, opts, io)
    const op = (
      await origin.ok('com.atproto.identity.signPlcOperation', {
        body: {
          token,
          verificationMethods: {
            atproto: reserved.signingKey.startsWith('did:key:') ? reserved.signingKey : `did:key:${reserved.signingKey}`,
          },
          services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: destEndpoint } },
          ...(opts.newHandle ? { alsoKnownAs: [`at://${handle}`] } : {}),
        },
      })
    ).json.operation
    io.log('      DID document now names the destination')
    const created = await dest.ok('com.atproto.server.createAccount', {
      body: { did, handle, email, password: opts.password, plcOp: op, ...(opts.inviteCode ? { inviteCode: opts.inviteCode } : {}) },
    })
    dest.token = created.json.accessJwt
  } else {
    const svc = (
      await origin.ok('com.atproto.server.getServiceAuth', { params: { aud: destDid, lxm: 'com.atproto.server.createAccount' } })
    ).json
    const created = await dest.ok('com.atproto.server.createAccount', {
      token: svc.token,
      body: { did, handle, email, password: opts.password, ...(opts.inviteCode ? { inviteCode: opts.inviteCode } : {}) },
    })
    dest.token = created.json.accessJwt
  }
  checkAbort()

  step(3, 'repository')
  let status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  if (!status.repoRev) {
    const car = opts.fromExport
      ? await opts.fromExport.repo()
      : (await origin.ok('com.atproto.sync.getRepo', { params: { did }, token: migrationToken })).bytes
    io.log(`      exported ${kb(car.length)} from ${opts.fromExport ? opts.fromExport.path : 'the origin'}`)
    await dest.ok('com.atproto.repo.importRepo', { raw: car, type: 'application/vnd.ipld.car' })
    status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  }
  io.log(`      records ${bar(status.indexedRecords, originStatus.indexedRecords)} ${status.indexedRecords}/${originStatus.indexedRecords}`)
  checkAbort()

  step(4, 'blobs')
  let uploaded = 0
  let bytes = 0
  const expected: number = status.expectedBlobs
  let have: number = status.importedBlobs
  for (let round = 0; round < 10_000; round++) {
    const page = (await dest.ok('com.atproto.repo.listMissingBlobs', { params: { limit: '100' } })).json
    const cids: string[] = [...new Set<string>(page.blobs.map((b: { cid: string }) => b.cid))]
    if (!cids.length) break
    for (const cid of cids) {
      checkAbort()
      const blob = opts.fromExport
        ? await opts.fromExport.blob(cid)
        : await origin.ok('com.atproto.sync.getBlob', { params: { did, cid }, token: migrationToken })
      await dest.ok('com.atproto.repo.uploadBlob', { raw: blob.bytes, type: blob.contentType || 'application/octet-stream' })
      uploaded++
      have++
      bytes += blob.bytes.length
      io.log(`      blobs ${bar(have, expected)} ${have}/${expected} (${kb(bytes)} this run)`)
    }
  }
  if (!uploaded) io.log(`      blobs ${bar(have, expected)} ${have}/${expected}`)
  checkAbort()

  step(5, 'preferences')
  const prefs = opts.fromExport
    ? { status: 200, json: { preferences: await opts.fromExport.preferences() } }
    : await origin.call('app.bsky.actor.getPreferences')
  if (prefs.status === 200) {
    await dest.ok('app.bsky.actor.putPreferences', { body: { preferences: prefs.json.preferences ?? [] } })
    io.log(`      ${(prefs.json.preferences ?? []).length} copied`)
  } else io.log('      the origin has none to give')

  step(6, 'permissioned repos (spaces)')
  const spaces = opts.fromExport
    ? exportedSpaces(opts.fromExport, io)
    : await saveSpaces(origin, did, opts.spacesDir ?? defaultSpacesDir(did), io)
  checkAbort()

  step(7, 'identity')
  status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  if (status.validDid) io.log('      DID document already names the destination')
  else if (flow === 'spec') throw new MigrateError('the DID document does not name the destination; sign a PLC operation on the origin')
  else {
    const creds = (await dest.ok('com.atproto.identity.getRecommendedDidCredentials')).json
    const token = await plcToken(origin, opts, io)
    const op = (await origin.ok('com.atproto.identity.signPlcOperation', { body: { token, ...creds } })).json.operation
    await dest.ok('com.atproto.identity.submitPlcOperation', { body: { operation: op } })
    io.log('      DID document now names the destination')
  }

  step(8, 'activation')
  status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  if (!status.activated) await dest.ok('com.atproto.server.activateAccount', { post: true })
  const originNow = await origin.call('com.atproto.server.checkAccountStatus')
  if (originNow.status === 200 && originNow.json.activated) {
    await origin.ok('com.atproto.server.deactivateAccount', { body: {} })
    io.log(`      active on ${dest.url}, deactivated on ${origin.url}`)
  } else io.log(`      active on ${dest.url}`)
  const recreated = await recreateSpaces(dest, spaces.saved, io)

  step(9, 'verification')
  status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  const data: any = await (await fetch(`${opts.plcUrl.replace(/\/+$/, '')}/${did}/data`, { signal: AbortSignal.timeout(10_000) })).json()
  const key: string = data?.verificationMethods?.atproto ?? ''
  const repo = await dest.ok('com.atproto.sync.getRepo', { params: { did } })
  let records = 0
  let valid: boolean
  try {
    records = (await verifyRepoCar(repo.bytes, did, key)).creates.length
    valid = true
  } catch {
    valid = false
  }
  const destBlobs = await countBlobs(dest, did)
  const summary: MigrateSummary = {
    did,
    flow,
    resumed,
    records: { origin: originStatus.indexedRecords, destination: records },
    blobs: { origin: originBlobs, destination: destBlobs, uploaded, bytes },
    signature: { valid, key },
    active: !!status.activated,
    spaces: { repos: spaces.saved.repos.length, savedTo: spaces.savedTo, governed: spaces.saved.governed.length, recreated },
  }
  io.log(`      records:    ${records} on the destination (origin had ${originStatus.indexedRecords})`)
  io.log(`      blobs:      ${destBlobs} on the destination (origin had ${originBlobs}; ${uploaded} uploaded, ${kb(bytes)} this run)`)
  io.log(`      signature:  ${valid ? 'valid' : 'INVALID'} against ${key || 'no key'} of the DID document`)
  io.log(`      status:     ${summary.active ? 'active' : 'NOT active'}`)
  if (spaces.saved.repos.length)
    io.log(
      `      spaces:     ${spaces.saved.repos.length} permissioned repos kept in ${spaces.savedTo} and on ${origin.url}, not on the destination`,
    )
  const complete = valid && summary.active && records === originStatus.indexedRecords && destBlobs === originBlobs
  io.log(complete ? 'migration complete' : 'migration INCOMPLETE: run the command again')
  return summary
}

async function plcToken(origin: Xrpc, opts: MigrateOptions, io: MigrateIo): Promise<string> {
  if (opts.plcToken) return opts.plcToken
  await origin.ok('com.atproto.identity.requestPlcOperationSignature', { post: true })
  io.log('      the origin emailed a PLC token to the account address')
  const token = (await io.askToken?.('PLC token from the email: '))?.trim()
  if (!token) throw new MigrateError('a PLC token was emailed; run the command again with --plc-token <token>')
  return token
}

async function countBlobs(server: Xrpc, did: string, token?: string): Promise<number> {
  let n = 0
  let cursor: string | undefined
  for (let i = 0; i < 10_000; i++) {
    const page = (await server.ok('com.atproto.sync.listBlobs', { params: { did, limit: '1000', ...(cursor ? { cursor } : {}) }, token }))
      .json
    n += page.cids.length
    cursor = page.cursor
    if (!cursor || !page.cids.length) break
  }
  return n
}

/** the endpoint the destination calls itself in its did:web document (may differ from the URL used) */
async function serviceEndpoint(url: string): Promise<string> {
  try {
    const res = await fetch(`${url}/.well-known/did.json`, { signal: AbortSignal.timeout(10_000) })
    const doc: any = res.ok ? await res.json() : undefined
    const svc = (doc?.service ?? []).find((s: any) => s?.type === 'AtprotoPersonalDataServer')
    if (typeof svc?.serviceEndpoint === 'string') return svc.serviceEndpoint.replace(/\/+$/, '')
  } catch {}
  return url
}

/** an export's files, read as the migration needs them */
export type ExportSource = {
  /** the directory holding manifest.json */
  path: string
  manifest: ExportManifest
  repo(): Promise<Uint8Array>
  blob(cid: string): Promise<{ bytes: Uint8Array; contentType: string }>
  preferences(): Promise<unknown[]>
  /** removes what opening it unpacked */
  close(): Promise<void>
}

/** an export directory, or a tar archive of one (the account page's download), unpacked to a temporary directory */
export async function openExport(path: string): Promise<ExportSource> {
  const info = await stat(path).catch(() => {
    throw new MigrateError(`no export at ${path}`)
  })
  let dir = path
  let unpacked: string | undefined
  if (info.isFile()) {
    unpacked = await mkdtemp(join(tmpdir(), 'pds-import-'))
    try {
      // absolute names and `..` are stripped by default: the archive writes only under the temporary directory
      await untar({ file: path, cwd: unpacked, strict: true })
    } catch (err) {
      await rm(unpacked, { recursive: true, force: true })
      throw new MigrateError(`${path} is not a readable export archive: ${(err as Error).message}`)
    }
    const top = await readdir(unpacked)
    dir = top.length === 1 && !top.includes(MANIFEST_FILE) ? join(unpacked, top[0]) : unpacked
  }
  const close = async () => {
    if (unpacked) await rm(unpacked, { recursive: true, force: true })
  }
  let manifest: ExportManifest
  try {
    manifest = JSON.parse(await readFile(join(dir, MANIFEST_FILE), 'utf8'))
    if (manifest?.format !== EXPORT_FORMAT || typeof manifest.did !== 'string' || !Array.isArray(manifest.blobs))
      throw new Error('not an export')
  } catch {
    await close()
    throw new MigrateError(`${path} holds no complete export (${MANIFEST_FILE} missing or not an export's manifest)`)
  }
  const types = new Map(manifest.blobs.map((b) => [b.cid, b.mimeType]))
  return {
    path,
    manifest,
    repo: async () => new Uint8Array(await readFile(join(dir, manifest.repo.file))),
    async blob(cid) {
      // a CID names a file in the export only when the manifest lists it
      const type = types.get(cid)
      if (type === undefined) throw new MigrateError(`the destination misses blob ${cid}, which the export at ${path} does not have`)
      return { bytes: new Uint8Array(await readFile(join(dir, BLOB_DIR, cid))), contentType: type }
    },
    async preferences() {
      const file = JSON.parse(await readFile(join(dir, manifest.preferences.file), 'utf8'))
      return Array.isArray(file?.preferences) ? file.preferences : []
    },
    close,
  }
}

/**
 * An export into an account that already exists on the destination (created there with the
 * export's DID, as a migration does): the repository, missing blobs and preferences, then
 * activation once the DID document names the destination.
 */
async function importExport(opts: MigrateOptions & { fromExport: ExportSource }, io: MigrateIo): Promise<MigrateSummary> {
  const source = opts.fromExport
  const { did } = source.manifest
  const dest = new Xrpc(opts.to.replace(/\/+$/, ''))
  const step = (n: number, text: string) => io.log(`[${n}/7] ${text}`)
  step(1, `logging in on ${dest.url} as ${did} (from the export at ${source.path})`)
  const login = await dest.call('com.atproto.server.createSession', { body: { identifier: did, password: opts.password } })
  if (login.status !== 200) {
    throw new MigrateError(
      `no account ${did} on ${dest.url} to import into (${login.json?.message ?? login.status}): create it there first, or give --from <origin> to move it`,
    )
  }
  dest.token = login.json.accessJwt
  let status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  step(2, 'repository')
  if (!status.repoRev) {
    const car = await source.repo()
    await dest.ok('com.atproto.repo.importRepo', { raw: car, type: 'application/vnd.ipld.car' })
    io.log(`      imported ${kb(car.length)}`)
  } else io.log(`      already imported (rev ${status.repoRev})`)
  step(3, 'blobs')
  let uploaded = 0
  let bytes = 0
  for (let round = 0; round < 10_000; round++) {
    const page = (await dest.ok('com.atproto.repo.listMissingBlobs', { params: { limit: '100' } })).json
    const cids: string[] = [...new Set<string>(page.blobs.map((b: { cid: string }) => b.cid))]
    if (!cids.length) break
    for (const cid of cids) {
      if (io.signal?.aborted) throw new MigrateError('interrupted; run the same command again to continue')
      const blob = await source.blob(cid)
      await dest.ok('com.atproto.repo.uploadBlob', { raw: blob.bytes, type: blob.contentType || 'application/octet-stream' })
      uploaded++
      bytes += blob.bytes.length
    }
  }
  io.log(`      ${uploaded} uploaded (${kb(bytes)})`)
  step(4, 'preferences')
  const preferences = await source.preferences()
  await dest.ok('app.bsky.actor.putPreferences', { body: { preferences } })
  io.log(`      ${preferences.length} copied`)
  step(5, 'permissioned repos (spaces)')
  const spaces = exportedSpaces(source, io)
  step(6, 'activation')
  status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  if (!status.activated && status.validDid) await dest.ok('com.atproto.server.activateAccount', { post: true })
  else if (!status.validDid) io.log(`      the DID document does not name ${dest.url} yet: the account stays deactivated until it does`)
  // a deactivated account governs nothing: its spaces are created once it is active
  const recreated = status.validDid ? await recreateSpaces(dest, spaces.saved, io) : 0
  step(7, 'verification')
  status = (await dest.ok('com.atproto.server.checkAccountStatus')).json
  const { counts } = source.manifest
  const summary: MigrateSummary = {
    did,
    flow: 'standard',
    resumed: false,
    records: { origin: counts.records, destination: status.indexedRecords },
    blobs: { origin: counts.blobs, destination: status.importedBlobs, uploaded, bytes },
    signature: { valid: !!status.validDid, key: '' },
    active: !!status.activated,
    spaces: { repos: spaces.saved.repos.length, savedTo: spaces.savedTo, governed: spaces.saved.governed.length, recreated },
  }
  io.log(`      records:    ${status.indexedRecords} on the destination (the export has ${counts.records})`)
  io.log(`      blobs:      ${status.importedBlobs}/${status.expectedBlobs} the records use are on the destination`)
  io.log(`      status:     ${summary.active ? 'active' : 'NOT active (deactivated)'}`)
  const complete = status.indexedRecords === counts.records && status.importedBlobs === status.expectedBlobs
  io.log(
    complete
      ? summary.active
        ? 'import complete'
        : 'import complete; activate once the DID document names the destination'
      : 'import INCOMPLETE: run the command again',
  )
  return summary
}

/** an export's permissioned repos: already files in it, under spaces/ */
function exportedSpaces(source: ExportSource, io: MigrateIo): SavedSpaces {
  const saved = source.manifest.spaces ?? { repos: [], governed: [] }
  if (saved.repos.length) {
    io.log(`      ${saved.repos.length} permissioned repos are in the export at ${source.path} (${SPACE_DIR}/); no server imports them yet`)
  } else io.log('      none in the export')
  return { saved, savedTo: saved.repos.length ? join(source.path, SPACE_DIR) : undefined }
}
