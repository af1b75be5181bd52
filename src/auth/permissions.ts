// The atproto permission model for OAuth callers: what a grant's scope string allows, parsed and
// matched by @atproto/oauth-scopes. A registry row lists the permissions a call needs (see
// registry.ts); the verifier asks `missingPermission` whether the grant covers them.
import {
  AccountPermission,
  BlobPermission,
  IdentityPermission,
  RepoPermission,
  RpcPermission,
  ScopePermissionsTransition,
  type AccountPermissionMatch,
  type BlobPermissionMatch,
  type IdentityPermissionMatch,
  type RepoPermissionMatch,
  type RpcPermissionMatch,
} from '@atproto/oauth-scopes'
import { formatSpaceScope, scopeStringAllows, type SpaceAsk } from '../space/scope.js'

/** one permission a call needs, in the shape the library matches */
export type Need =
  | ({ kind: 'repo' } & RepoPermissionMatch)
  | ({ kind: 'rpc' } & RpcPermissionMatch)
  | ({ kind: 'blob' } & BlobPermissionMatch)
  | ({ kind: 'account' } & AccountPermissionMatch)
  | ({ kind: 'identity' } & IdentityPermissionMatch)
  | SpaceNeed

/** a call on a space (`space:` permission): granted when any of `asks` is (putRecord may create or
 *  replace); `user` is the token's account, which `authority=self` stands for */
export type SpaceNeed = { kind: 'space'; space: { authority: string; type: string; skey: string }; asks: readonly SpaceAsk[] }

/**
 * The library's transitional reading of a grant (`transition:generic` reaches every repository
 * write, blob and non-chat service; `transition:email` reads the address), widened so that
 * `transition:generic` keeps reaching the account and identity methods it always reached here
 * (deactivation, handle, PLC operations, email confirmation). Reading the address itself still
 * takes `account:email` or `transition:email`.
 */
export class GrantedPermissions extends ScopePermissionsTransition {
  constructor(readonly scope: string) {
    super(scope)
  }

  override allowsAccount(options: AccountPermissionMatch): boolean {
    if (this.hasTransitionGeneric && !(options.attr === 'email' && options.action === 'read')) return true
    return super.allowsAccount(options)
  }

  override allowsIdentity(options: IdentityPermissionMatch): boolean {
    return this.hasTransitionGeneric || super.allowsIdentity(options)
  }

  // the library parses every value of the grant on each check; an app repeats the same few checks
  // (its collections, its media types), so each answer is kept with the grant
  private answers = new Map<string, boolean>()

  /** whether the grant covers `need` */
  allows(need: Need, user = ''): boolean {
    const key = needKey(need) + (need.kind === 'space' ? ` ${user}` : '')
    let answer = this.answers.get(key)
    if (answer === undefined) {
      answer = this.decide(need, user)
      if (this.answers.size >= ANSWERS_MAX) this.answers.clear()
      this.answers.set(key, answer)
    }
    return answer
  }

  private decide(need: Need, user: string): boolean {
    switch (need.kind) {
      case 'space':
        // `transition:generic` grants nothing here: only `space:` permissions do
        return need.asks.some((ask) => scopeStringAllows(this.scope, { space: need.space, user, ...ask }))
      case 'repo':
        return this.allowsRepo(need)
      case 'rpc':
        return this.allowsRpc(need)
      case 'blob':
        return this.allowsBlob(need)
      case 'account':
        return this.allowsAccount(need)
      case 'identity':
        return this.allowsIdentity(need)
    }
  }
}

/** the `rpc:` permission a call of `lxm` at service `aud` (`did#id`) needs. An NSID's authority is
 *  case-insensitive: `CHAT.bsky.x` must need what `chat.bsky.x` needs */
export function rpcNeed(lxm: string, aud: string): Need {
  const dot = lxm.lastIndexOf('.')
  return { kind: 'rpc', lxm: dot < 0 ? lxm : lxm.slice(0, dot).toLowerCase() + lxm.slice(dot), aud }
}

const ANSWERS_MAX = 64

function needKey(need: Need): string {
  switch (need.kind) {
    case 'repo':
      return `repo ${need.collection} ${need.action}`
    case 'rpc':
      return `rpc ${need.lxm} ${need.aud}`
    case 'blob':
      return `blob ${need.mime}`
    case 'account':
      return `account ${need.attr} ${need.action}`
    case 'identity':
      return `identity ${need.attr}`
    case 'space':
      return `space ${need.space.authority} ${need.space.type} ${need.space.skey} ${JSON.stringify(need.asks)}`
  }
}

/** the scope string that would grant `need` (what a refusal names) */
export function scopeFor(need: Need): string {
  switch (need.kind) {
    case 'repo':
      return RepoPermission.scopeNeededFor(need)
    case 'rpc':
      return RpcPermission.scopeNeededFor(need)
    case 'blob':
      return BlobPermission.scopeNeededFor(need)
    case 'account':
      return AccountPermission.scopeNeededFor(need)
    case 'identity':
      return IdentityPermission.scopeNeededFor(need)
    case 'space': {
      const ask = need.asks[0] ?? { action: 'read' }
      const { authority, type, skey } = need.space
      return formatSpaceScope({
        type,
        authority,
        skey,
        collections: 'collection' in ask && ask.collection !== undefined ? [ask.collection] : undefined,
        actions: 'action' in ask ? [ask.action] : [],
        manage: 'manage' in ask ? [ask.manage] : [],
      })
    }
  }
}

// grants are few (one per app and user, repeated on every call): parse each scope string once
const CACHE_MAX = 512
const parsed = new Map<string, GrantedPermissions>()

/** the permissions a granted scope string holds (cached by the string) */
export function permissionsOf(scope: string): GrantedPermissions {
  let perms = parsed.get(scope)
  if (perms) return perms
  perms = new GrantedPermissions(scope)
  if (parsed.size >= CACHE_MAX) parsed.delete(parsed.keys().next().value as string)
  parsed.set(scope, perms)
  return perms
}

/** the first of `needs` that `scope` (granted to `user`) does not grant, as the scope string that would, or undefined */
export function missingPermission(scope: string, needs: readonly Need[], user?: string): string | undefined {
  if (needs.length === 0) return undefined
  const perms = permissionsOf(scope)
  for (const need of needs) if (!perms.allows(need, user)) return scopeFor(need)
  return undefined
}

/** the refusal's message, as the reference server words it */
export const missingMessage = (scope: string) => `Missing required scope "${scope}"`
