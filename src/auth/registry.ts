// Every method id the server knows, with its auth check, the account statuses it admits, the
// OAuth scope it requires, whether app-password sessions must be privileged, and its rate limit.
// docs/decisions.md explains the rows that differ from the reference PDS (privileged app passwords,
// deactivated accounts' migration methods, scopes of methods); a row may exist before its handler
// does. Handlers never see the Authorization header: they declare nothing, this table does.
import type { AccountStatus } from '../db/index.js'

export type Check =
  | 'none' // unauthenticated
  | 'access' // session Bearer or OAuth DPoP access token
  | 'optional' // as access, but a missing header yields no account; a bad one still errors
  | 'refresh' // session refresh token (refreshSession, deleteSession only)
  | 'admin' // HTTP Basic admin:<PDS_ADMIN_PASSWORD>

export type Scope = 'atproto' | 'transition:generic'
export type RateLimitName = 'login' | 'createAccount' | 'email' | 'resetPassword' | 'write' | 'upload' | 'handleCheck' | 'import'

export type Row = {
  check: Check
  /** statuses admitted past the gate; default ['active'] (takendown and deleted never pass) */
  statuses?: Extract<AccountStatus, 'active' | 'deactivated'>[]
  /** OAuth callers only: a password session holds every scope */
  scope?: Scope
  /** a non-privileged app-password session gets 403 InsufficientScope: it must not change the
   *  address and then reset the password, or move the account away */
  privileged?: boolean | ((params: Record<string, unknown>) => boolean)
  /** no OAuth token may call it, whatever its scope: methods that could hand the account to
   *  someone else (its address, its password, a credential that outlives the app's grant) */
  sessionOnly?: boolean
  /** OAuth callers, beyond `scope`: a check that depends on the call's parameters */
  oauthAllows?: (scope: string, params: Record<string, unknown>) => boolean
  rateLimit?: RateLimitName
  /** also accepts as Bearer the 60-minute migration token requestAccountMigrate hands out */
  migrationToken?: boolean
  /** also accepts, as Bearer, a service-auth JWT another server minted for this method (lxm = its id) */
  serviceAuth?: boolean
  /** what one call costs of the `write` rate limit: a number, or one computed from the input body */
  writePoints?: number | ((body: Record<string, unknown>) => number)
}

const DEACTIVATED_OK: Row['statuses'] = ['active', 'deactivated']

export const registry = {
  // sessions
  'com.atproto.server.createSession': { check: 'none', rateLimit: 'login' },
  'com.atproto.server.refreshSession': { check: 'refresh' },
  'com.atproto.server.deleteSession': { check: 'refresh' },
  'com.atproto.server.getSession': { check: 'access', scope: 'atproto' },
  'com.atproto.server.createAccount': { check: 'none', rateLimit: 'createAccount', serviceAuth: true },

  // app passwords
  'com.atproto.server.createAppPassword': { check: 'access', sessionOnly: true, privileged: true },
  'com.atproto.server.listAppPasswords': { check: 'access', sessionOnly: true, privileged: true },
  'com.atproto.server.revokeAppPassword': { check: 'access', sessionOnly: true, privileged: true },

  // email flows
  'com.atproto.server.requestEmailConfirmation': { check: 'access', scope: 'transition:generic', privileged: true, rateLimit: 'email' },
  'com.atproto.server.confirmEmail': { check: 'access', scope: 'transition:generic', privileged: true },
  'com.atproto.server.requestEmailUpdate': { check: 'access', sessionOnly: true, privileged: true, rateLimit: 'email' },
  'com.atproto.server.updateEmail': { check: 'access', sessionOnly: true, privileged: true },
  'com.atproto.server.requestPasswordReset': { check: 'none', rateLimit: 'resetPassword' },
  'com.atproto.server.resetPassword': { check: 'none', rateLimit: 'resetPassword' },

  // lifecycle
  'com.atproto.server.checkAccountStatus': { check: 'access', statuses: DEACTIVATED_OK, scope: 'atproto' },
  'com.atproto.server.deactivateAccount': { check: 'access', scope: 'transition:generic', privileged: true },
  'com.atproto.server.activateAccount': { check: 'access', statuses: DEACTIVATED_OK, scope: 'transition:generic', privileged: true },
  'com.atproto.server.requestAccountDelete': { check: 'access', sessionOnly: true, privileged: true, rateLimit: 'email' },
  // its password check spends the account's login budget
  'com.atproto.server.deleteAccount': { check: 'access', sessionOnly: true, rateLimit: 'login' },

  // discovery
  'com.atproto.server.describeServer': { check: 'none' },
  'com.atproto.identity.resolveHandle': { check: 'none' },
  'com.atproto.identity.resolveDid': { check: 'none' },
  'com.atproto.identity.resolveIdentity': { check: 'none' },
  // a refresh makes this server fetch documents again: only for signed-in callers
  'com.atproto.identity.refreshIdentity': { check: 'access', scope: 'atproto' },

  // sign-up: the form checks handles as the user types; the app asks about the queue afterwards
  'com.atproto.temp.checkHandleAvailability': { check: 'none', rateLimit: 'handleCheck' },
  'com.atproto.temp.checkSignupQueue': { check: 'access', scope: 'atproto' },

  // invites and service auth
  'com.atproto.server.getAccountInviteCodes': { check: 'access', scope: 'atproto' },
  // a service token carries no more than the caller could do itself with the method it names
  'com.atproto.server.getServiceAuth': {
    check: 'access',
    scope: 'atproto',
    privileged: (p) => delegationNeedsPrivilege(p.lxm),
    oauthAllows: (scope, p) => oauthMayDelegate(scope, p.lxm),
  },
  'com.atproto.server.createInviteCode': { check: 'admin' },
  'com.atproto.server.createInviteCodes': { check: 'admin' },

  // repositories and blobs
  // write points as the reference PDS counts them: a create 3, an update 2, a delete 1
  'com.atproto.repo.createRecord': { check: 'access', scope: 'transition:generic', rateLimit: 'write', writePoints: 3 },
  'com.atproto.repo.putRecord': { check: 'access', scope: 'transition:generic', rateLimit: 'write', writePoints: 2 },
  'com.atproto.repo.deleteRecord': { check: 'access', scope: 'transition:generic', rateLimit: 'write', writePoints: 1 },
  'com.atproto.repo.applyWrites': {
    check: 'access',
    scope: 'transition:generic',
    rateLimit: 'write',
    writePoints: (body) => batchWritePoints(body.writes),
  },
  'com.atproto.repo.uploadBlob': { check: 'access', statuses: DEACTIVATED_OK, scope: 'transition:generic', rateLimit: 'upload' },
  'com.atproto.repo.importRepo': { check: 'access', statuses: DEACTIVATED_OK, scope: 'transition:generic', rateLimit: 'import' },
  // reads need `atproto` of an OAuth caller, writes `transition:generic`; anyone may read without a token
  'com.atproto.repo.getRecord': { check: 'optional', scope: 'atproto' },
  'com.atproto.repo.listRecords': { check: 'optional', scope: 'atproto' },
  'com.atproto.repo.describeRepo': { check: 'optional', scope: 'atproto' },
  'com.atproto.repo.listMissingBlobs': { check: 'access', statuses: DEACTIVATED_OK, scope: 'atproto' },
  'com.atproto.sync.listMissingBlobs': { check: 'access', statuses: DEACTIVATED_OK, scope: 'atproto' },

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
  'com.atproto.identity.updateHandle': { check: 'access', scope: 'transition:generic', privileged: true },
  'com.atproto.identity.getRecommendedDidCredentials': { check: 'access', statuses: DEACTIVATED_OK, scope: 'atproto' },
  'com.atproto.identity.requestPlcOperationSignature': {
    check: 'access',
    scope: 'transition:generic',
    privileged: true,
    rateLimit: 'email',
  },
  'com.atproto.identity.signPlcOperation': { check: 'access', scope: 'transition:generic', privileged: true },
  'com.atproto.identity.submitPlcOperation': { check: 'access', statuses: DEACTIVATED_OK, scope: 'transition:generic', privileged: true },

  // migration with a key the destination reserves
  'com.atproto.server.requestAccountMigrate': { check: 'access', scope: 'transition:generic', privileged: true },
  'com.atproto.server.reserveSigningKey': { check: 'optional', scope: 'transition:generic' },

  // preferences: open to deactivated accounts, since migration tools copy them before activating
  'app.bsky.actor.getPreferences': { check: 'access', statuses: DEACTIVATED_OK, scope: 'atproto' },
  'app.bsky.actor.putPreferences': { check: 'access', statuses: DEACTIVATED_OK, scope: 'transition:generic' },

  // administration (HTTP Basic)
  'com.atproto.admin.updateSubjectStatus': { check: 'admin' },
  'com.atproto.admin.getSubjectStatus': { check: 'admin' },
  'com.atproto.admin.getAccountInfo': { check: 'admin' },
  'com.atproto.admin.getAccountInfos': { check: 'admin' },
  'com.atproto.admin.sendEmail': { check: 'admin' },
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
  return !!row && (!!row.sessionOnly || !!row.privileged || row.check === 'admin')
}

let lowerIds: Map<string, Row> | undefined
// a differently cased id must not slip past the row it names
const rowsByLowerId = () => (lowerIds ??= new Map(Object.entries(registry as Record<string, Row>).map(([k, r]) => [k.toLowerCase(), r])))

/** whether an OAuth grant of `scope` may get a service token for `lxm` */
function oauthMayDelegate(scope: string, lxm: unknown): boolean {
  if (typeof lxm !== 'string' || lxm === '') return false
  const have = scope.split(' ')
  if (isChatMethod(lxm)) return have.includes('transition:chat.bsky')
  if (delegationNeedsPrivilege(lxm)) return false
  return oauthMayCall(have, lxm)
}

/** an OAuth grant reaches a non-privileged method through the wide transition scope */
function oauthMayCall(have: string[], _nsid: string): boolean {
  return have.includes('transition:generic')
}

/** the row of `nsid`, or undefined when it has none */
export const rowOf = (nsid: string): Row | undefined =>
  Object.hasOwn(registry, nsid) ? (registry as Record<string, Row>)[nsid] : undefined

export function rowFor(nsid: string): Row {
  const row = rowOf(nsid)
  if (!row) throw new Error(`no auth registry row for ${nsid}`)
  return row
}
