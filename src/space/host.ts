// The space host: for every space whose authority is a local account, its simplespace policy (or
// tombstone), member list, writer set and notification registrations, and the decisions made from
// them (who may get a credential, whose write notification counts). Notifications go out only
// after the transaction that caused them committed, and their failures are logged, never raised.
import type { Services } from '../context.js'
import type { Writer } from '../db/index.js'
import { serviceEndpoint } from '../identity/did-resolver.js'
import { readCapped } from '../outbound.js'
import { mintServiceAuth } from '../auth/service-auth.js'
import { spaceError } from './errors.js'
import { parseSpaceRef, type SpaceRef } from './refs.js'
import type { NotifySpacesDeleted } from './repo-write.js'

const DEFS = 'com.atproto.simplespace.defs'
export const PUBLIC_POLICY = `${DEFS}#publicPolicy`
export const MEMBER_LIST_POLICY = `${DEFS}#memberListPolicy`
export const MANAGING_APP_POLICY = `${DEFS}#managingAppPolicy`
export const OPEN_ACCESS = `${DEFS}#open`
export const ALLOW_LIST_ACCESS = `${DEFS}#allowList`

export type Policy =
  { $type: typeof PUBLIC_POLICY } | { $type: typeof MEMBER_LIST_POLICY } | { $type: typeof MANAGING_APP_POLICY; managingApp: string }
export type AppAccess = { $type: typeof OPEN_ACCESS } | { $type: typeof ALLOW_LIST_ACCESS; allowed: string[] }

export const NOTIFY_WRITE = 'com.atproto.space.notifyWrite'
export const NOTIFY_DELETED = 'com.atproto.space.notifySpaceDeleted'
export const CHECK_USER_ACCESS = 'com.atproto.simplespace.checkUserAccess'
/** a syncer's registration lasts this long unless renewed */
export const REGISTRATION_LIFETIME_MS = 24 * 60 * 60 * 1000
const OUTBOUND_TIMEOUT_MS = 5000
const SERVICE_ID = /^did:[a-z]+:[a-zA-Z0-9._:%-]+(#[a-zA-Z0-9._~-]+)?$/

export type HostDeps = Pick<Services, 'db' | 'config' | 'tokenKeys' | 'didResolver' | 'outbound' | 'logger'>

/** the user policy of a createSpace/updateSpace input, or UnsupportedPolicy */
export function readPolicy(input: unknown): Policy {
  const p = input as { $type?: unknown; managingApp?: unknown } | undefined
  switch (p?.$type) {
    case PUBLIC_POLICY:
      return { $type: PUBLIC_POLICY }
    case MEMBER_LIST_POLICY:
      return { $type: MEMBER_LIST_POLICY }
    case MANAGING_APP_POLICY:
      if (typeof p.managingApp !== 'string' || !p.managingApp.startsWith('did:') || !SERVICE_ID.test(p.managingApp))
        throw spaceError('UnsupportedPolicy', 'managingApp must be a service identifier: a DID with an optional #fragment')
      return { $type: MANAGING_APP_POLICY, managingApp: p.managingApp }
    default:
      throw spaceError('UnsupportedPolicy', `policy must be one of ${PUBLIC_POLICY}, ${MEMBER_LIST_POLICY}, ${MANAGING_APP_POLICY}`)
  }
}

/** the app access of a createSpace/updateSpace input, or UnsupportedAppAccess */
export function readAppAccess(input: unknown): AppAccess {
  const a = input as { $type?: unknown; allowed?: unknown } | undefined
  switch (a?.$type) {
    case OPEN_ACCESS:
      return { $type: OPEN_ACCESS }
    case ALLOW_LIST_ACCESS:
      if (!Array.isArray(a.allowed) || !a.allowed.every((c) => typeof c === 'string'))
        throw spaceError('UnsupportedAppAccess', 'allowed must be a list of client ids')
      return { $type: ALLOW_LIST_ACCESS, allowed: a.allowed }
    default:
      throw spaceError('UnsupportedAppAccess', `appAccess must be one of ${OPEN_ACCESS}, ${ALLOW_LIST_ACCESS}`)
  }
}

export type SpaceConfig = { space: SpaceRef; policy: Policy; appAccess: AppAccess; deleted: boolean }

/** the space's config (deleted: a tombstone), or undefined when it was never created */
export async function spaceConfig(db: Writer, space: SpaceRef): Promise<SpaceConfig | undefined> {
  const row = await db.selectFrom('space_config').selectAll().where('space', '=', space.uri).executeTakeFirst()
  if (!row) return undefined
  return { space, policy: JSON.parse(row.policy), appAccess: JSON.parse(row.app_access), deleted: row.deleted_at !== null }
}

/** the active config of a space, or SpaceNotFound (never created, deleted) */
export async function activeSpace(db: Writer, space: SpaceRef): Promise<SpaceConfig> {
  const config = await spaceConfig(db, space)
  if (!config || config.deleted) throw spaceError('SpaceNotFound', 'No such space')
  return config
}

/** NotSpaceOwner unless `did` is the authority of `space` */
export function requireOwner(did: string, space: SpaceRef): void {
  if (space.authority !== did) throw spaceError('NotSpaceOwner', 'Only the authority of a space manages it')
}

/** whether `did` is an account of this server that may govern spaces */
export async function isLocalAuthority(db: Writer, did: string): Promise<boolean> {
  const status = await authorityStatus(db, did)
  return status !== undefined && status !== 'deleted'
}

/** the status of the local account `did`, or undefined when it is not one of ours */
export async function authorityStatus(db: Writer, did: string) {
  const row = await db.selectFrom('account').select('status').where('did', '=', did).executeTakeFirst()
  return row?.status
}

/**
 * The active config of a space whose authority's account is active. A taken-down or deactivated
 * authority's spaces are not served (SpaceNotFound) until it is active again: its key mints no
 * credential and its host hands nobody the writer set, so members' data stops flowing to apps
 * the moment the authority is switched off, and nothing is lost for when it comes back.
 */
export async function governedSpace(db: Writer, space: SpaceRef): Promise<SpaceConfig> {
  const config = await activeSpace(db, space)
  const status = await authorityStatus(db, space.authority)
  if (status !== 'active') throw spaceError('SpaceNotFound', `The space's authority is ${status ?? 'not an account here'}`)
  return config
}

/** creates the space (again, when deleted: a fresh config); SpaceAlreadyExists when active */
export async function createSpace(db: HostDeps['db'], space: SpaceRef, policy: Policy, appAccess: AppAccess): Promise<void> {
  const row = {
    policy: JSON.stringify(policy),
    app_access: JSON.stringify(appAccess),
    created_at: new Date().toISOString(),
    deleted_at: null,
  }
  await db.transact(async (tx) => {
    // a tombstone is revived in place; otherwise the insert, which a concurrent create loses
    const revived = await tx
      .updateTable('space_config')
      .set(row)
      .where('space', '=', space.uri)
      .where('deleted_at', 'is not', null)
      .executeTakeFirst()
    if (Number(revived.numUpdatedRows) > 0) {
      // a fresh space: an addMember, a write notification or a registration that raced the
      // deletion (through another process) may have landed after it cleared these
      for (const table of ['space_member', 'space_writer', 'space_notify'] as const)
        await tx.deleteFrom(table).where('space', '=', space.uri).execute()
      return
    }
    const inserted = await tx
      .insertInto('space_config')
      .values({ space: space.uri, authority: space.authority, type: space.type, ...row })
      .onConflict((oc) => oc.column('space').doNothing())
      .returning('space')
      .executeTakeFirst()
    if (!inserted) throw spaceError('SpaceAlreadyExists', 'The space already exists')
  })
}

/** replaces the given policies wholesale; SpaceNotFound unless active */
export async function updateSpace(db: HostDeps['db'], space: SpaceRef, change: { policy?: Policy; appAccess?: AppAccess }): Promise<void> {
  await db.transact(async (tx) => {
    await activeSpace(tx, space)
    const set = {
      ...(change.policy ? { policy: JSON.stringify(change.policy) } : {}),
      ...(change.appAccess ? { app_access: JSON.stringify(change.appAccess) } : {}),
    }
    if (Object.keys(set).length > 0) await tx.updateTable('space_config').set(set).where('space', '=', space.uri).execute()
  })
}

export async function addMember(db: HostDeps['db'], space: SpaceRef, did: string): Promise<void> {
  await db.transact(async (tx) => {
    await activeSpace(tx, space)
    await tx
      .insertInto('space_member')
      .values({ space: space.uri, did })
      .onConflict((oc) => oc.doNothing())
      .execute()
  })
}

export async function removeMember(db: HostDeps['db'], space: SpaceRef, did: string): Promise<void> {
  await db.transact(async (tx) => {
    await activeSpace(tx, space)
    await tx.deleteFrom('space_member').where('space', '=', space.uri).where('did', '=', did).execute()
  })
}

/** members sorted by DID, after `cursor` (the last DID of the previous page) */
export async function listMembers(db: Writer, space: SpaceRef, limit: number, cursor?: string) {
  let q = db.selectFrom('space_member').select('did').where('space', '=', space.uri)
  if (cursor) q = q.where('did', '>', cursor)
  const rows = await q.orderBy('did').limit(limit).execute()
  return { members: rows.map((r) => ({ did: r.did })), cursor: rows.length === limit ? rows[rows.length - 1].did : undefined }
}

/** the writer set sorted by DID */
export async function listWriters(db: Writer, space: SpaceRef, limit: number, cursor?: string) {
  let q = db.selectFrom('space_writer').select(['did', 'rev', 'hash']).where('space', '=', space.uri)
  if (cursor) q = q.where('did', '>', cursor)
  const rows = await q.orderBy('did').limit(limit).execute()
  return {
    repos: rows.map((r) => ({ did: r.did, rev: r.rev, hash: new Uint8Array(r.hash) })),
    cursor: rows.length === limit ? rows[rows.length - 1].did : undefined,
  }
}

/**
 * Deletes the space: a tombstone stays, the member list, writer set and registrations go, and the
 * registered syncers are told once it committed. Never created → SpaceNotFound; deleted → no-op.
 * `dropOwnRepo` removes the authority's own permissioned repo in the same transaction.
 */
export async function deleteSpace(
  deps: HostDeps,
  space: SpaceRef,
  dropOwnRepo: (tx: Parameters<Parameters<HostDeps['db']['transact']>[0]>[0]) => Promise<void> = async () => {},
): Promise<void> {
  await deps.db.transact(async (tx) => {
    const config = await spaceConfig(tx, space)
    if (!config) throw spaceError('SpaceNotFound', 'No such space')
    if (config.deleted) return
    const services = await liveRegistrations(tx, space)
    await tx.updateTable('space_config').set({ deleted_at: new Date().toISOString() }).where('space', '=', space.uri).execute()
    for (const table of ['space_member', 'space_writer', 'space_notify'] as const)
      await tx.deleteFrom(table).where('space', '=', space.uri).execute()
    await dropOwnRepo(tx)
    tx.onCommit(() => fanOut(deps, space, services, NOTIFY_DELETED, { space: space.uri }))
  })
}

/**
 * The space host's side of an authority's account deletion, which tombstoned its spaces in the
 * account's transaction: once that committed, each space's registered syncers hear
 * notifySpaceDeleted as from deleteSpace.
 */
export function spacesDeletedHook(deps: HostDeps): NotifySpacesDeleted {
  return (spaces) => {
    for (const { space, services } of spaces) {
      try {
        fanOut(deps, parseSpaceRef(space), services, NOTIFY_DELETED, { space })
      } catch (err) {
        deps.logger.warn({ err, space }, 'the syncers of a deleted space were not notified')
      }
    }
  }
}

/** registers `service` for the space's notifications (replacing and extending an earlier one) */
export async function registerNotify(deps: HostDeps, space: SpaceRef, service: string): Promise<string> {
  if (!SERVICE_ID.test(service) || !(await resolveService(deps, service)))
    throw spaceError('ServiceNotResolvable', 'service must be a DID, optionally with a #fragment, whose document names an endpoint')
  const expiresAt = new Date(Date.now() + REGISTRATION_LIFETIME_MS).toISOString()
  await deps.db.transact(async (tx) => {
    await governedSpace(tx, space)
    await tx
      .insertInto('space_notify')
      .values({ space: space.uri, service, expires_at: expiresAt })
      .onConflict((oc) => oc.columns(['space', 'service']).doUpdateSet({ expires_at: expiresAt }))
      .execute()
  })
  return expiresAt
}

export async function unregisterNotify(db: HostDeps['db'], space: SpaceRef, service: string): Promise<void> {
  await db.transact(async (tx) => {
    await governedSpace(tx, space)
    await tx.deleteFrom('space_notify').where('space', '=', space.uri).where('service', '=', service).execute()
  })
}

async function liveRegistrations(db: Writer, space: SpaceRef): Promise<string[]> {
  const rows = await db
    .selectFrom('space_notify')
    .select('service')
    .where('space', '=', space.uri)
    .where('expires_at', '>', new Date().toISOString())
    .execute()
  return rows.map((r) => r.service)
}

/**
 * Whether the space's user policy admits `user`: the authority always; `public` everyone;
 * `member-list` its members; `managing-app` whoever the app's checkUserAccess authorizes (any
 * failure to ask denies).
 */
export async function admitsUser(deps: HostDeps, config: SpaceConfig, user: string, clientId?: string): Promise<boolean> {
  if (user === config.space.authority) return true
  const policy = config.policy
  switch (policy.$type) {
    case PUBLIC_POLICY:
      return true
    case MEMBER_LIST_POLICY: {
      const row = await deps.db
        .selectFrom('space_member')
        .select('did')
        .where('space', '=', config.space.uri)
        .where('did', '=', user)
        .executeTakeFirst()
      return row !== undefined
    }
    case MANAGING_APP_POLICY:
      return askManagingApp(deps, config.space, policy.managingApp, user, clientId)
    default:
      return false
  }
}

/** whether the space's app access admits the attested client (undefined: none attested) */
export function admitsApp(config: SpaceConfig, clientId: string | undefined): boolean {
  if (config.appAccess.$type === OPEN_ACCESS) return true
  return clientId !== undefined && config.appAccess.allowed.includes(clientId)
}

async function askManagingApp(deps: HostDeps, space: SpaceRef, app: string, user: string, clientId?: string): Promise<boolean> {
  try {
    const endpoint = await resolveService(deps, app)
    if (!endpoint) return false
    const token = await mintServiceAuth(deps, { iss: space.authority, aud: app, lxm: CHECK_USER_ACCESS })
    const qs = new URLSearchParams({ space: space.uri, user, ...(clientId ? { clientId } : {}) })
    const res = await deps.outbound.request(`${endpoint}/xrpc/${CHECK_USER_ACCESS}?${qs}`, {
      headers: { authorization: `Bearer ${token}` },
      headersTimeout: OUTBOUND_TIMEOUT_MS,
      bodyTimeout: OUTBOUND_TIMEOUT_MS,
    })
    const body = await readCapped(res.body, 64 * 1024)
    if (res.statusCode !== 200 || !body) return false
    return JSON.parse(body.toString('utf8'))?.authorized === true
  } catch (err) {
    deps.logger.warn({ err, space: space.uri, app }, 'the managing app could not be asked; access denied')
    return false
  }
}

/** the endpoint a service identifier names: its `#fragment` service, or `#atproto_pds` without one */
export async function resolveService(
  deps: Pick<HostDeps, 'didResolver'>,
  service: string,
  fallbacks: string[] = [],
): Promise<string | undefined> {
  const at = service.indexOf('#')
  const did = at < 0 ? service : service.slice(0, at)
  const doc = await deps.didResolver.resolve(did)
  if (!doc) return undefined
  const ids = at < 0 ? ['#atproto_pds'] : [service.slice(at), ...fallbacks]
  for (const id of ids) {
    const url = serviceEndpoint(doc, id)
    if (url) return url
  }
  return undefined
}

export type NotifyBody = { space: string; repo: string; rev: string; hash: Uint8Array }

/**
 * A write notification arriving at the space host, its service token already verified (`iss`,
 * `aud`): the writer must be `iss` and the audience the authority. For a space this server does
 * not govern (or no longer does) nothing happens; a writer the user policy does not admit is
 * refused; otherwise the writer set learns the new rev and hash and the syncers are told.
 */
export async function receiveNotifyWrite(deps: HostDeps, from: { iss: string; aud: string }, body: NotifyBody): Promise<void> {
  const space = parseSpaceRef(body.space)
  if (from.iss !== body.repo) throw spaceError('Forbidden', 'The notification must come from the writer itself')
  if (from.aud !== space.authority) throw spaceError('Forbidden', 'The notification must be addressed to the authority of the space')
  if (!(await isLocalAuthority(deps.db, space.authority))) return
  const config = await spaceConfig(deps.db, space)
  if (!config || config.deleted) return
  if (!(await admitsUser(deps, config, body.repo))) throw spaceError('Forbidden', 'The writer is not admitted to this space')
  await deps.db.transact(async (tx) => {
    const hash = Buffer.from(body.hash)
    // a late notification never moves the writer back
    const moved = await tx
      .insertInto('space_writer')
      .values({ space: space.uri, did: body.repo, rev: body.rev, hash })
      .onConflict((oc) =>
        oc
          .columns(['space', 'did'])
          .doUpdateSet((eb) => ({ rev: eb.ref('excluded.rev'), hash: eb.ref('excluded.hash') }))
          .where('space_writer.rev', '<', (eb) => eb.ref('excluded.rev')),
      )
      .returning('rev')
      .executeTakeFirst()
    // a switched-off authority's key tells nobody anything; the writer set stays current for its return
    if (!moved || (await authorityStatus(tx, space.authority)) !== 'active') return
    const services = await liveRegistrations(tx, space)
    tx.onCommit(() => fanOut(deps, space, services, NOTIFY_WRITE, notifyJson(body)))
  })
}

/**
 * The repo host's hook: tells the authority's space host that `did` wrote to `space`. A local
 * authority is told in-process; another is reached at its `#atproto_space_host`, else its
 * `#atproto_pds`, with a service token signed by the writer. Never throws.
 */
export function notifyWriteHook(deps: HostDeps) {
  return async (spaceUri: string, did: string, rev: string, hash: Uint8Array): Promise<void> => {
    const body: NotifyBody = { space: spaceUri, repo: did, rev, hash }
    try {
      const space = parseSpaceRef(spaceUri)
      if (await isLocalAuthority(deps.db, space.authority)) {
        await receiveNotifyWrite(deps, { iss: did, aud: space.authority }, body)
        return
      }
      const endpoint = await resolveService(deps, `${space.authority}#atproto_space_host`, ['#atproto_pds'])
      if (!endpoint) throw new Error(`the authority ${space.authority} names no space host`)
      const token = await mintServiceAuth(deps, { iss: did, aud: space.authority, lxm: NOTIFY_WRITE })
      await post(deps, endpoint, NOTIFY_WRITE, token, notifyJson(body))
    } catch (err) {
      deps.logger.warn({ err, space: spaceUri, did }, 'the space host was not told of a write')
    }
  }
}

const notifyJson = (b: NotifyBody) => ({
  space: b.space,
  repo: b.repo,
  rev: b.rev,
  hash: { $bytes: Buffer.from(b.hash).toString('base64').replace(/=+$/, '') },
})

// in the background, best effort: each registered syncer gets the body with the authority's service token
function fanOut(deps: HostDeps, space: SpaceRef, services: string[], lxm: string, body: unknown): void {
  for (const service of services) {
    void (async () => {
      const endpoint = await resolveService(deps, service)
      if (!endpoint) throw new Error(`${service} does not resolve`)
      const token = await mintServiceAuth(deps, { iss: space.authority, aud: service, lxm })
      await post(deps, endpoint, lxm, token, body)
    })().catch((err) => deps.logger.warn({ err, space: space.uri, service }, 'a registered syncer was not notified'))
  }
}

async function post(deps: HostDeps, endpoint: string, lxm: string, token: string, body: unknown): Promise<void> {
  const res = await deps.outbound.request(`${endpoint}/xrpc/${lxm}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    headersTimeout: OUTBOUND_TIMEOUT_MS,
    bodyTimeout: OUTBOUND_TIMEOUT_MS,
  })
  await res.body.dump()
  if (res.statusCode >= 300) throw new Error(`${lxm} answered ${res.statusCode}`)
}
