// Every method id the server knows, with its auth check, the account statuses it admits, the
// OAuth permissions it needs (as a function of the call's input), whether app-password sessions
// must be privileged, and its rate limit.
// docs/decisions.md explains the rows that differ from the reference PDS (privileged app passwords,
// deactivated accounts' migration methods, scopes of methods); a row may exist before its handler
// does. Handlers never see the Authorization header: they declare nothing, this table does.
import type { AccountStatus } from '../db/index.js'
import type { RepoAction } from '@atproto/oauth-scopes'
import { rpcNeed, type Need } from './permissions.js'
import { isSpaceRef, parseSpaceRef } from '../space/refs.js'
import type { SpaceAsk } from '../space/scope.js'

export type Check =
  | 'none' // unauthenticated
  | 'access' // session Bearer or OAuth DPoP access token
  | 'optional' // as access, but a missing header yields no account; a bad one still errors
  | 'refresh' // session refresh token (refreshSession, deleteSession only)
  | 'admin' // HTTP Basic admin:<PDS_ADMIN_PASSWORD>
  | 'moderator' // admin Basic, or a service token of the moderation service (PDS_MOD_SERVICE_DID)
  | 'spaceCredential' // a space credential as DPoP, with a proof bound to it (Spaces)
  | 'delegation' // a delegation token as Bearer with a DPoP proof without ath (getSpaceCredential)
  | 'spaceNotify' // another server's service token addressed to a DID the handler checks (notifyWrite)

/** what a row's `permissions` sees of a call before its body is read */
export type Call = {
  params: Record<string, unknown>
  /** the request's media type (no parameters, lower case); blob uploads are matched on it */
  contentType?: string
  /** the configured AppView as a service reference (`did#bsky_appview`) */
  appView: string
  /** where the call is forwarded: the `atproto-proxy` header when sent, else the AppView's reference */
  proxyTo: string
}
export type RateLimitName = 'login' | 'createAccount' | 'email' | 'resetPassword' | 'write' | 'upload' | 'handleCheck' | 'import'

export type Row = {
  check: Check
  /** statuses admitted past the gate; default ['active'] (deleted never passes, takendown only
   *  where a row names it) */
  statuses?: Extract<AccountStatus, 'active' | 'deactivated' | 'takendown'>[]
  /** OAuth callers only (a password session holds every permission): what the call needs, checked
   *  with the token. Every OAuth grant holds `atproto`; a row without this needs nothing more */
  permissions?: readonly Need[] | ((call: Call) => readonly Need[])
  /** OAuth callers: what the call needs that its input body decides, checked once the body is
   *  parsed and before the handler runs */
  bodyPermissions?: (body: Record<string, unknown>, caller?: string) => readonly Need[]
  /** a non-privileged app-password session gets 403 InsufficientScope: it must not change the
   *  address and then reset the password, or move the account away */
  privileged?: boolean | ((params: Record<string, unknown>) => boolean)
  /** no OAuth token may call it, whatever its scope: methods that could hand the account to
   *  someone else (its address, its password, a credential that outlives the app's grant) */
  sessionOnly?: boolean | ((params: Record<string, unknown>) => boolean)
  rateLimit?: RateLimitName
  /** also accepts as Bearer the 60-minute migration token requestAccountMigrate hands out */
  migrationToken?: boolean
  /** also accepts, as Bearer, a user's service-auth JWT minted for this method (lxm = its id): on
   *  a `none` row anyone's (createAccount proves control of a DID with it), on an `access` row only
   *  an account of this server's, through the same status gate (the video service uploads for it) */
  serviceAuth?: boolean
  /** with serviceAuth: also accepts admin Basic, the operator acting outside the sign-up rules */
  adminBasic?: boolean
  /** an access row that also takes a space credential (DPoP) for the call's space: its holder
   *  reads any repo of that space */
  spaceCredential?: boolean
  /** what one call costs of the `write` rate limit: a number, or one computed from the input body */
  writePoints?: number | ((body: Record<string, unknown>) => number)
}

const DEACTIVATED_OK: Row['statuses'] = ['active', 'deactivated']

// the permissions rows name, in the reference PDS's terms
const EMAIL_MANAGE: readonly Need[] = [{ kind: 'account', attr: 'email', action: 'manage' }]
const STATUS_MANAGE: readonly Need[] = [{ kind: 'account', attr: 'status', action: 'manage' }]
const IDENTITY_ALL: readonly Need[] = [{ kind: 'identity', attr: '*' }]
const write = (collection: unknown, action: RepoAction): Need => ({ kind: 'repo', collection: String(collection), action })
/** preferences live here but belong to the AppView: apps ask for them as for an AppView method */
const appViewRpc =
  (lxm: string) =>
  ({ appView }: Call): readonly Need[] => [rpcNeed(lxm, appView)]

/** what a call on the space `space` needs; a malformed reference needs nothing here, as the
 *  handler refuses it with InvalidRequest before anything happens */
function spaceNeed(space: unknown, ...asks: SpaceAsk[]): Need[] {
  if (typeof space !== 'string' || !isSpaceRef(space)) return []
  const { authority, type, skey } = parseSpaceRef(space)
  return [{ kind: 'space', space: { authority, type, skey }, asks }]
}

const SPACE_BATCH_ACTIONS: Record<string, 'create' | 'update' | 'delete'> = {
  'com.atproto.space.applyWrites#create': 'create',
  'com.atproto.space.applyWrites#update': 'update',
  'com.atproto.space.applyWrites#delete': 'delete',
}

/** every write of a space batch: its action on its collection */
function spaceBatchNeeds(space: unknown, writes: unknown): Need[] {
  if (!Array.isArray(writes)) return []
  return writes.flatMap((w: { $type?: string; collection?: unknown }) =>
    spaceNeed(space, { action: SPACE_BATCH_ACTIONS[w?.$type ?? ''] ?? 'create', collection: String(w?.collection) }),
  )
}

// a deactivated account still reads its own permissioned repos; a taken-down one reports alone
const SPACE_SELF_READ = {
  check: 'access',
  spaceCredential: true,
  statuses: ['active', 'deactivated'],
  permissions: ({ params }: Call) => spaceNeed(params.space, { action: 'read_self' }),
} as const satisfies Row

/** a simplespace change by the space's owner: `manage=<verb>` on the space the body names */
const manageSpace = (verb: 'update' | 'delete') =>
  ({ check: 'access', bodyPermissions: (b) => spaceNeed(b.space, { manage: verb }) }) as const satisfies Row

export const registry = {
  // sessions
  'com.atproto.server.createSession': { check: 'none', rateLimit: 'login' },
  'com.atproto.server.refreshSession': { check: 'refresh' },
  'com.atproto.server.deleteSession': { check: 'refresh' },
  'com.atproto.server.getSession': { check: 'access' },
  'com.atproto.server.createAccount': { check: 'none', rateLimit: 'createAccount', serviceAuth: true, adminBasic: true },

  // app passwords
  'com.atproto.server.createAppPassword': { check: 'access', sessionOnly: true, privileged: true },
  'com.atproto.server.listAppPasswords': { check: 'access', sessionOnly: true, privileged: true },
  'com.atproto.server.revokeAppPassword': { check: 'access', sessionOnly: true, privileged: true },

  // email flows
  'com.atproto.server.requestEmailConfirmation': { check: 'access', permissions: EMAIL_MANAGE, privileged: true, rateLimit: 'email' },
  'com.atproto.server.confirmEmail': { check: 'access', permissions: EMAIL_MANAGE, privileged: true },
  'com.atproto.server.requestEmailUpdate': { check: 'access', sessionOnly: true, privileged: true, rateLimit: 'email' },
  'com.atproto.server.updateEmail': { check: 'access', sessionOnly: true, privileged: true },
  'com.atproto.server.requestPasswordReset': { check: 'none', rateLimit: 'resetPassword' },
  'com.atproto.server.resetPassword': { check: 'none', rateLimit: 'resetPassword' },

  // lifecycle
  'com.atproto.server.checkAccountStatus': { check: 'access', statuses: DEACTIVATED_OK },
  'com.atproto.server.deactivateAccount': { check: 'access', permissions: STATUS_MANAGE, privileged: true },
  'com.atproto.server.activateAccount': { check: 'access', statuses: DEACTIVATED_OK, permissions: STATUS_MANAGE, privileged: true },
  'com.atproto.server.requestAccountDelete': { check: 'access', sessionOnly: true, privileged: true, rateLimit: 'email' },
  // its password check spends the account's login budget
  'com.atproto.server.deleteAccount': { check: 'access', sessionOnly: true, rateLimit: 'login' },

  // discovery
  'com.atproto.server.describeServer': { check: 'none' },
  'com.atproto.identity.resolveHandle': { check: 'none' },
  'com.atproto.identity.resolveDid': { check: 'none' },
  'com.atproto.identity.resolveIdentity': { check: 'none' },
  // a refresh makes this server fetch documents again: only for signed-in callers
  'com.atproto.identity.refreshIdentity': { check: 'access' },

  // sign-up: the form checks handles as the user types; the app asks about the queue afterwards
  'com.atproto.temp.checkHandleAvailability': { check: 'none', rateLimit: 'handleCheck' },
  'com.atproto.temp.checkSignupQueue': { check: 'access' },

  // invites and service auth
  'com.atproto.server.getAccountInviteCodes': { check: 'access' },
  // a service token carries no more than the caller could do itself with the method it names: an
  // OAuth app needs the `rpc:` permission for that method and audience, and never gets a token
  // for no method or for one kept from OAuth apps or plain app passwords (chat aside: its own
  // permission covers it)
  'com.atproto.server.getServiceAuth': {
    check: 'access',
    privileged: (p) => delegationNeedsPrivilege(p.lxm),
    sessionOnly: (p) => !(typeof p.lxm === 'string' && isChatMethod(p.lxm)) && delegationNeedsPrivilege(p.lxm),
    permissions: ({ params }) => [rpcNeed(typeof params.lxm === 'string' ? params.lxm : '*', String(params.aud))],
  },
  'com.atproto.server.createInviteCode': { check: 'admin' },
  'com.atproto.server.createInviteCodes': { check: 'admin' },

  // repositories and blobs
  // write points as the reference PDS counts them: a create 3, an update 2, a delete 1
  // a write needs `repo:` for its collection and action; putRecord may create or replace, so both
  'com.atproto.repo.createRecord': {
    check: 'access',
    bodyPermissions: (b) => [write(b.collection, 'create')],
    rateLimit: 'write',
    writePoints: 3,
  },
  'com.atproto.repo.putRecord': {
    check: 'access',
    bodyPermissions: (b) => [write(b.collection, 'create'), write(b.collection, 'update')],
    rateLimit: 'write',
    writePoints: 2,
  },
  'com.atproto.repo.deleteRecord': {
    check: 'access',
    bodyPermissions: (b) => [write(b.collection, 'delete')],
    rateLimit: 'write',
    writePoints: 1,
  },
  // every write of the batch is checked before any is applied
  'com.atproto.repo.applyWrites': {
    check: 'access',
    bodyPermissions: (b) => batchPermissions(b.writes),
    rateLimit: 'write',
    writePoints: (body) => batchWritePoints(body.writes),
  },
  // `blob:` matched against the upload's declared media type
  // the video service uploads with the user's service token for this method
  'com.atproto.repo.uploadBlob': {
    check: 'access',
    serviceAuth: true,
    statuses: DEACTIVATED_OK,
    permissions: ({ contentType }) => [{ kind: 'blob', mime: contentType || 'application/octet-stream' }],
    rateLimit: 'upload',
  },
  'com.atproto.repo.importRepo': {
    check: 'access',
    statuses: DEACTIVATED_OK,
    permissions: [{ kind: 'account', attr: 'repo', action: 'manage' }],
    rateLimit: 'import',
  },
  // reads need nothing beyond `atproto` of an OAuth caller; anyone may read without a token
  'com.atproto.repo.getRecord': { check: 'optional' },
  'com.atproto.repo.listRecords': { check: 'optional' },
  'com.atproto.repo.describeRepo': { check: 'optional' },
  'com.atproto.repo.listMissingBlobs': { check: 'access', statuses: DEACTIVATED_OK },
  'com.atproto.sync.listMissingBlobs': { check: 'access', statuses: DEACTIVATED_OK },

  // sync (public reads; getRepo and getBlob also take the migration token)
  'com.atproto.sync.getRepo': { check: 'none', migrationToken: true },
  'com.atproto.sync.getBlob': { check: 'none', migrationToken: true },
  'com.atproto.sync.getLatestCommit': { check: 'none' },
  'com.atproto.sync.getHead': { check: 'none' },
  'com.atproto.sync.getCheckout': { check: 'none' },
  'com.atproto.sync.getRecord': { check: 'none' },
  'com.atproto.sync.getBlocks': { check: 'none' },
  'com.atproto.sync.getRepoStatus': { check: 'none' },
  'com.atproto.sync.listRepos': { check: 'none' },
  'com.atproto.sync.listBlobs': { check: 'none' },
  'com.atproto.sync.subscribeRepos': { check: 'none' },

  // identity
  'com.atproto.identity.updateHandle': { check: 'access', permissions: [{ kind: 'identity', attr: 'handle' }], privileged: true },
  'com.atproto.identity.getRecommendedDidCredentials': { check: 'access', statuses: DEACTIVATED_OK },
  // PLC operations can change anything in the identity: `identity:*`
  'com.atproto.identity.requestPlcOperationSignature': {
    check: 'access',
    permissions: IDENTITY_ALL,
    privileged: true,
    rateLimit: 'email',
  },
  'com.atproto.identity.signPlcOperation': { check: 'access', permissions: IDENTITY_ALL, privileged: true },
  'com.atproto.identity.submitPlcOperation': { check: 'access', statuses: DEACTIVATED_OK, permissions: IDENTITY_ALL, privileged: true },

  // migration with a key the destination reserves: moving away changes the identity and
  // deactivates the account here; reserving a key prepares an identity change
  'com.atproto.server.requestAccountMigrate': {
    check: 'access',
    permissions: [...IDENTITY_ALL, ...STATUS_MANAGE],
    privileged: true,
  },
  'com.atproto.server.reserveSigningKey': { check: 'optional', permissions: IDENTITY_ALL },

  // preferences: open to deactivated accounts, since migration tools copy them before activating
  'app.bsky.actor.getPreferences': {
    check: 'access',
    statuses: DEACTIVATED_OK,
    permissions: appViewRpc('app.bsky.actor.getPreferences'),
  },
  'app.bsky.actor.putPreferences': {
    check: 'access',
    statuses: DEACTIVATED_OK,
    permissions: appViewRpc('app.bsky.actor.putPreferences'),
  },

  // forwarded to a service other than the AppView, chosen as the reference PDS chooses it
  // a custom feed: the token goes to the feed's generator, so an app needs both methods
  'app.bsky.feed.getFeed': {
    check: 'access',
    permissions: ({ proxyTo }) => [rpcNeed('app.bsky.feed.getFeed', proxyTo), rpcNeed('app.bsky.feed.getFeedSkeleton', proxyTo)],
  },
  // push registration goes to the notification service the body names (its `rpc:` audience is
  // checked once the body is read)
  'app.bsky.notification.registerPush': {
    check: 'access',
    bodyPermissions: (b) => [rpcNeed('app.bsky.notification.registerPush', `${String(b.serviceDid)}#bsky_notif`)],
  },
  'app.bsky.notification.unregisterPush': {
    check: 'access',
    bodyPermissions: (b) => [rpcNeed('app.bsky.notification.unregisterPush', `${String(b.serviceDid)}#bsky_notif`)],
  },
  // a taken-down account may still report (an appeal goes this way)
  'com.atproto.moderation.createReport': {
    check: 'access',
    statuses: ['active', 'takendown'],
    permissions: ({ proxyTo }) => [rpcNeed('com.atproto.moderation.createReport', proxyTo)],
  },

  // Spaces, repo host: a `space:` permission on the space the call names (a password session holds
  // them all). Writes cost what public writes cost; putRecord may create or replace, and once the
  // record is looked up the write itself asks for exactly the one it does
  'com.atproto.space.createRecord': {
    check: 'access',
    bodyPermissions: (b) => spaceNeed(b.space, { action: 'create', collection: String(b.collection) }),
    rateLimit: 'write',
    writePoints: 3,
  },
  'com.atproto.space.putRecord': {
    check: 'access',
    bodyPermissions: (b) =>
      spaceNeed(b.space, { action: 'create', collection: String(b.collection) }, { action: 'update', collection: String(b.collection) }),
    rateLimit: 'write',
    writePoints: 2,
  },
  'com.atproto.space.deleteRecord': {
    check: 'access',
    bodyPermissions: (b) => spaceNeed(b.space, { action: 'delete', collection: String(b.collection) }),
    rateLimit: 'write',
    writePoints: 1,
  },
  'com.atproto.space.applyWrites': {
    check: 'access',
    bodyPermissions: (b) => spaceBatchNeeds(b.space, b.writes),
    rateLimit: 'write',
    writePoints: (body) => batchWritePoints(body.writes),
  },
  // reads of the caller's own repo: `read_self`; a taken-down or deactivated owner is answered
  // with the repo's status by the read itself
  'com.atproto.space.getRecord': SPACE_SELF_READ,
  'com.atproto.space.listRecords': SPACE_SELF_READ,
  'com.atproto.space.getBlob': SPACE_SELF_READ,
  'com.atproto.space.listBlobs': SPACE_SELF_READ,
  'com.atproto.space.getLatestCommit': SPACE_SELF_READ,
  'com.atproto.space.getRepo': SPACE_SELF_READ,
  'com.atproto.space.listRepoOps': SPACE_SELF_READ,
  // the caller's spaces: `read_self` over every space the filters leave open
  'com.atproto.space.listSpaces': {
    check: 'access',
    statuses: DEACTIVATED_OK,
    permissions: ({ params }) => [
      {
        kind: 'space',
        space: {
          type: typeof params.type === 'string' ? params.type : '*',
          authority: typeof params.did === 'string' ? params.did : '*',
          skey: '*',
        },
        asks: [{ action: 'read_self' }],
      },
    ],
  },

  // Spaces, space host (spaces of local authorities). simplespace: the owner, with `manage=` on the
  // space (createSpace: the caller's own space of that type; without skey, every skey)
  'com.atproto.simplespace.createSpace': {
    check: 'access',
    bodyPermissions: (b, caller) => [
      {
        kind: 'space',
        space: { authority: String(caller), type: String(b.type), skey: typeof b.skey === 'string' ? b.skey : '*' },
        asks: [{ manage: 'create' }],
      },
    ],
  },
  'com.atproto.simplespace.updateSpace': manageSpace('update'),
  'com.atproto.simplespace.addMember': manageSpace('update'),
  'com.atproto.simplespace.removeMember': manageSpace('update'),
  'com.atproto.simplespace.deleteSpace': manageSpace('delete'),
  'com.atproto.simplespace.getSpace': {
    check: 'access',
    spaceCredential: true,
    permissions: ({ params }) => spaceNeed(params.space, { action: 'read_self' }),
  },
  'com.atproto.simplespace.listMembers': { check: 'access', permissions: ({ params }) => spaceNeed(params.space, { action: 'read_self' }) },
  // the user's PDS vouches for the app; app passwords are refused by the method itself
  'com.atproto.space.getDelegationToken': { check: 'access', permissions: ({ params }) => spaceNeed(params.space, { action: 'read' }) },
  'com.atproto.space.getSpaceCredential': { check: 'delegation' },
  'com.atproto.space.listRepos': { check: 'spaceCredential' },
  'com.atproto.space.registerNotify': { check: 'spaceCredential' },
  'com.atproto.space.unregisterNotify': { check: 'spaceCredential' },
  'com.atproto.space.notifyWrite': { check: 'spaceNotify' },

  // administration: HTTP Basic; the moderator methods also take the moderation service's token
  'com.atproto.admin.updateSubjectStatus': { check: 'moderator' },
  'com.atproto.admin.getSubjectStatus': { check: 'moderator' },
  'com.atproto.admin.getAccountInfo': { check: 'admin' },
  'com.atproto.admin.getAccountInfos': { check: 'moderator' },
  'com.atproto.admin.sendEmail': { check: 'moderator' },
  'com.atproto.admin.disableAccountInvites': { check: 'admin' },
  'com.atproto.admin.enableAccountInvites': { check: 'admin' },
  'com.atproto.admin.deleteAccount': { check: 'admin' },
  'com.atproto.admin.updateAccountPassword': { check: 'admin' },
  'com.atproto.admin.searchAccounts': { check: 'admin' },
  'com.atproto.admin.getInviteCodes': { check: 'admin' },
  'com.atproto.admin.disableInviteCodes': { check: 'admin' },
  'com.atproto.admin.updateAccountHandle': { check: 'admin' },
  'com.atproto.admin.updateAccountEmail': { check: 'admin' },
  'com.atproto.admin.updateAccountSigningKey': { check: 'admin' },
  // Ozone calls it with the admin password when an account is compromised
  'com.atproto.temp.revokeAccountCredentials': { check: 'admin' },
} as const satisfies Record<string, Row>

/** a method id the registry has a row for */
export type MethodId = keyof typeof registry
/** the row of `M`, with its literal values (its check decides the handler's auth type) */
export type RowOf<M extends MethodId> = (typeof registry)[M]

const OP_POINTS: Record<string, number> = {
  'com.atproto.repo.applyWrites#create': 3,
  'com.atproto.repo.applyWrites#update': 2,
  'com.atproto.repo.applyWrites#delete': 1,
  'com.atproto.space.applyWrites#create': 3,
  'com.atproto.space.applyWrites#update': 2,
  'com.atproto.space.applyWrites#delete': 1,
}

const BATCH_ACTIONS: Record<string, RepoAction> = {
  'com.atproto.repo.applyWrites#create': 'create',
  'com.atproto.repo.applyWrites#update': 'update',
  'com.atproto.repo.applyWrites#delete': 'delete',
}

/** what an applyWrites batch needs: each write's collection and action */
function batchPermissions(writes: unknown): Need[] {
  if (!Array.isArray(writes)) return []
  return writes.map((w: { $type?: string; collection?: unknown }) => write(w?.collection, BATCH_ACTIONS[w?.$type ?? ''] ?? 'create'))
}

/** an applyWrites batch costs what its operations would cost one by one (at least 1) */
function batchWritePoints(writes: unknown): number {
  if (!Array.isArray(writes)) return 1
  return Math.max(
    1,
    writes.reduce((n: number, w) => n + (OP_POINTS[(w as { $type?: string })?.$type ?? ''] ?? 1), 0),
  )
}

/** chat reaches private messages; method ids are matched whatever their case */
export const isChatMethod = (nsid: string) => nsid.toLowerCase().startsWith('chat.bsky.')

/** true when only a main-password or privileged app-password session may get a service token for
 *  `lxm`: none named (good for every method), chat, moving the account, or a method that OAuth
 *  tokens, plain app passwords or everyone but the admin are kept from */
function delegationNeedsPrivilege(lxm: unknown): boolean {
  if (typeof lxm !== 'string' || lxm === '') return true
  const id = lxm.toLowerCase()
  // another server's createAccount with this DID is how the account moves away
  if (isChatMethod(id) || id === 'com.atproto.server.createaccount') return true
  const row = rowsByLowerId().get(id)
  return !!row && (!!row.sessionOnly || !!row.privileged || row.check === 'admin' || row.check === 'moderator')
}

let lowerIds: Map<string, Row> | undefined
// a differently cased id must not slip past the row it names
const rowsByLowerId = () => (lowerIds ??= new Map(Object.entries(registry as Record<string, Row>).map(([k, r]) => [k.toLowerCase(), r])))

/** the row of `nsid`, or undefined when it has none */
export const rowOf = (nsid: string): Row | undefined =>
  Object.hasOwn(registry, nsid) ? (registry as Record<string, Row>)[nsid] : undefined

export function rowFor(nsid: string): Row {
  const row = rowOf(nsid)
  if (!row) throw new Error(`no auth registry row for ${nsid}`)
  return row
}
