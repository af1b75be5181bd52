// The `space:` OAuth permission:
//   space:<type|*>[?authority=<did|self|*>][&skey=<skey|*>][&collection=<nsid|*>…][&action=<a>…][&manage=<m>…]
// Defaults: authority `self`, skey `*`, every record action, no management, and the collections
// the space type declares (none for `*`). Tokens never carry `self` or an unresolved collection
// list: the authorization server rewrites both when it issues them (rewriteSpaceScope).
import { isValidDid, isValidNsid } from '@atproto/syntax'
import { isValidSkey } from './refs.js'

export const SPACE_ACTIONS = ['read_self', 'read', 'create', 'update', 'delete'] as const
export const SPACE_MANAGE = ['create', 'update', 'delete'] as const
export type SpaceAction = (typeof SPACE_ACTIONS)[number]
export type SpaceManage = (typeof SPACE_MANAGE)[number]

const DEFAULT_ACTIONS: SpaceAction[] = ['read', 'create', 'update', 'delete']
const SINGLE = new Set(['authority', 'skey'])
const KNOWN = new Set(['authority', 'skey', 'collection', 'action', 'manage'])

export type SpaceScope = {
  /** an NSID or `*` */
  type: string
  /** a DID, `self` (the user) or `*` */
  authority: string
  /** an skey or `*` */
  skey: string
  /** NSIDs or `*`; undefined until the type's declared collections are filled in */
  collections?: string[]
  actions: SpaceAction[]
  manage: SpaceManage[]
}

/** a malformed `space:` permission; the authorization server answers it with invalid_scope */
export class SpaceScopeError extends Error {}

export const isSpaceScope = (s: string) => s.startsWith('space:')

/** a `space:` scope value parsed; SpaceScopeError saying why when it is malformed */
export function parseSpaceScope(value: string): SpaceScope {
  if (!isSpaceScope(value)) throw new SpaceScopeError(`${value} is not a space: permission`)
  const q = value.indexOf('?')
  const type = safeDecode(value.slice('space:'.length, q < 0 ? undefined : q), value)
  const params = new Map<string, string[]>()
  if (q >= 0 && q < value.length - 1) {
    for (const part of value.slice(q + 1).split('&')) {
      const eq = part.indexOf('=')
      if (eq <= 0) throw new SpaceScopeError(`${value}: parameter "${part}" is not name=value`)
      const key = safeDecode(part.slice(0, eq), value)
      params.set(key, [...(params.get(key) ?? []), safeDecode(part.slice(eq + 1), value)])
    }
  }
  return checkSpaceScope(type, (key) => params.get(key), [...params.keys()], value)
}

/** the permission in its string form: defaults left out, repeated values once, in a fixed order */
export function formatSpaceScope(s: SpaceScope): string {
  const params: string[] = []
  if (s.authority !== 'self') params.push(`authority=${encode(s.authority)}`)
  if (s.skey !== '*') params.push(`skey=${encode(s.skey)}`)
  for (const c of s.collections ?? []) params.push(`collection=${encode(c)}`)
  const actions = SPACE_ACTIONS.filter((a) => s.actions.includes(a))
  if (!(actions.length === DEFAULT_ACTIONS.length && DEFAULT_ACTIONS.every((a) => actions.includes(a))))
    for (const a of actions) params.push(`action=${a}`)
  for (const m of SPACE_MANAGE.filter((m) => s.manage.includes(m))) params.push(`manage=${m}`)
  return `space:${encode(s.type)}${params.length ? '?' + params.join('&') : ''}`
}

/**
 * The permission as a token carries it: `self` becomes the user's DID and a concrete type without
 * collections gets the ones its declaration lists (`declared`; undefined when it could not be
 * resolved, which refuses the scope).
 */
export function rewriteSpaceScope(s: SpaceScope, userDid: string, declared?: readonly string[]): SpaceScope {
  const out = { ...s, authority: s.authority === 'self' ? userDid : s.authority }
  if (s.collections === undefined) {
    if (s.type === '*') return { ...out, collections: [] }
    if (declared === undefined) throw new SpaceScopeError(`the declaration of space type ${s.type} could not be resolved`)
    const bad = declared.find((c) => !isValidNsid(c))
    if (bad !== undefined) throw new SpaceScopeError(`space type ${s.type} declares a collection that is not an NSID: ${bad}`)
    return { ...out, collections: [...declared] }
  }
  return out
}

/** what a request asks: a record action (on `collection` for writes) or a management verb */
export type SpaceAsk = { action: SpaceAction; collection?: string } | { manage: SpaceManage }

export type SpaceRequest = {
  /** the space's authority, type and skey; `*` where a listing spans every value */
  space: { authority: string; type: string; skey: string }
  /** the token's user, which `authority=self` stands for */
  user: string
} & SpaceAsk

/**
 * Whether `s` grants the request. `read` covers whole-space reads and implies `read_self` (reads
 * of the holder's own repo; the handler checks the repo is the caller's); create, update and
 * delete also need the collection listed (or `*`).
 */
export function spaceScopeAllows(s: SpaceScope, req: SpaceRequest): boolean {
  const authority = s.authority === 'self' ? req.user : s.authority
  if (!matches(s.type, req.space.type) || !matches(authority, req.space.authority) || !matches(s.skey, req.space.skey)) return false
  if ('manage' in req) return s.manage.includes(req.manage)
  switch (req.action) {
    case 'read':
      return s.actions.includes('read')
    case 'read_self':
      return s.actions.includes('read') || s.actions.includes('read_self')
    default: {
      if (!s.actions.includes(req.action) || req.collection === undefined) return false
      const cols = s.collections ?? []
      return cols.includes('*') || cols.includes(req.collection)
    }
  }
}

/** whether any `space:` permission in a token's scope string grants the request (malformed ones grant nothing) */
export function scopeStringAllows(scope: string, req: SpaceRequest): boolean {
  return scope
    .split(' ')
    .filter(isSpaceScope)
    .some((v) => {
      try {
        return spaceScopeAllows(parseSpaceScope(v), req)
      } catch (err) {
        if (err instanceof SpaceScopeError) return false
        throw err
      }
    })
}

/**
 * The `space:` permissions a permission set grants, as scope strings. An entry is
 * `{type: 'permission', resource: 'space', spaceType, authority?, skey?, collection?, action?, manage?}`;
 * its spaceType must be concrete and under the set's own NSID namespace (its collections need
 * not be). Entries for other resources are not this function's business and are skipped;
 * a malformed space entry is dropped.
 */
export function spaceScopesOfPermissionSet(setNsid: string, permissions: readonly unknown[]): string[] {
  const out = new Set<string>()
  for (const p of permissions) {
    if (p === null || typeof p !== 'object') continue
    const entry = p as Record<string, unknown>
    if (entry.type !== 'permission' || entry.resource !== 'space') continue
    const type = entry.spaceType
    if (typeof type !== 'string' || type === '*' || !underNamespace(setNsid, type)) continue
    const get = (key: string): string[] | undefined => {
      const v = entry[key]
      if (v === undefined) return undefined
      if (typeof v === 'string') return [v]
      if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v
      throw new SpaceScopeError(`${key} must be a string or a list of strings`)
    }
    const keys = Object.keys(entry).filter((k) => k !== 'type' && k !== 'resource' && k !== 'spaceType')
    try {
      out.add(formatSpaceScope(checkSpaceScope(type, get, keys, `space permission of ${setNsid}`)))
    } catch (err) {
      if (!(err instanceof SpaceScopeError)) throw err
    }
  }
  return [...out]
}

export type ScopeWords = {
  /** one sentence saying what the permission lets the app do */
  text: string
  /** any kind of space of anyone: the consent page shows this prominently */
  warning: boolean
}

export type ScopeWordsContext = {
  /** the `name` of the type's declaration, shown instead of the NSID */
  typeName?: string
  /** the authority's verified handle, shown instead of its DID */
  authorityHandle?: string
}

/** the permission in plain words for the consent page: one sentence */
export function describeSpaceScope(s: SpaceScope, ctx: ScopeWordsContext = {}): ScopeWords {
  const kind = s.type === '*' ? 'any kind of space' : `“${ctx.typeName ?? s.type}” spaces`
  const owner =
    s.authority === 'self'
      ? 'you own'
      : s.authority === '*'
        ? 'anyone owns'
        : `${ctx.authorityHandle ? '@' + ctx.authorityHandle : s.authority} owns`
  const which =
    s.skey === '*'
      ? s.type === '*'
        ? `any space ${owner}`
        : `${kind} ${owner}`
      : `the space “${s.skey}” (${s.type === '*' ? 'of any kind' : kind.replace(/ spaces$/, '')}) ${owner}`
  const parts: string[] = []
  if (s.actions.includes('read')) parts.push('read everything members wrote')
  else if (s.actions.includes('read_self')) parts.push('read what you wrote')
  const writes = (['create', 'update', 'delete'] as const).filter((a) => s.actions.includes(a))
  if (writes.length) {
    const cols = s.collections
    const what =
      cols === undefined
        ? 'your records of the kinds the space type defines'
        : cols.includes('*')
          ? 'any of your records'
          : cols.length === 0
            ? undefined
            : `your ${list(cols.map((c) => `“${c}”`))} records`
    if (what) parts.push(`${list(writes.map((w) => ({ create: 'create', update: 'change', delete: 'delete' })[w]))} ${what}`)
  }
  const manage = SPACE_MANAGE.filter((m) => s.manage.includes(m)).map(
    (m) => ({ create: 'create such spaces', update: 'change their settings and members', delete: 'delete them' })[m],
  )
  parts.push(...manage)
  const doing = parts.length ? list(parts) : 'see that they exist and nothing more'
  return { text: `In ${which}: ${doing}.`, warning: s.type === '*' && s.authority === '*' }
}

function checkSpaceScope(type: string, get: (key: string) => string[] | undefined, keys: string[], what: string): SpaceScope {
  if (type !== '*' && !isValidNsid(type)) throw new SpaceScopeError(`${what}: the space type must be an NSID or *`)
  for (const k of keys) if (!KNOWN.has(k)) throw new SpaceScopeError(`${what}: unknown parameter ${k}`)
  for (const k of SINGLE) if ((get(k)?.length ?? 0) > 1) throw new SpaceScopeError(`${what}: ${k} may be given once`)
  const authority = get('authority')?.[0] ?? 'self'
  if (authority !== 'self' && authority !== '*' && !isValidDid(authority))
    throw new SpaceScopeError(`${what}: authority must be a DID, self or *`)
  const skey = get('skey')?.[0] ?? '*'
  if (skey !== '*' && !isValidSkey(skey)) throw new SpaceScopeError(`${what}: skey is malformed`)
  const collections = get('collection')
  for (const c of collections ?? []) if (c !== '*' && !isValidNsid(c)) throw new SpaceScopeError(`${what}: collection must be an NSID or *`)
  const actions = get('action') ?? DEFAULT_ACTIONS
  for (const a of actions) if (!(SPACE_ACTIONS as readonly string[]).includes(a)) throw new SpaceScopeError(`${what}: unknown action ${a}`)
  const manage = get('manage') ?? []
  for (const m of manage)
    if (!(SPACE_MANAGE as readonly string[]).includes(m)) throw new SpaceScopeError(`${what}: unknown manage verb ${m}`)
  return {
    type,
    authority,
    skey,
    collections: collections && [...new Set(collections)],
    actions: [...new Set(actions as SpaceAction[])],
    manage: [...new Set(manage as SpaceManage[])],
  }
}

// a concrete type may only be granted by a set published under the same namespace authority
function underNamespace(setNsid: string, nsid: string): boolean {
  const group = setNsid.lastIndexOf('.')
  return group > 0 && nsid.length > group + 1 && nsid.startsWith(setNsid.slice(0, group + 1))
}

const matches = (granted: string, asked: string) => granted === '*' || granted === asked

function safeDecode(s: string, value: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    throw new SpaceScopeError(`${value}: bad percent-encoding`)
  }
}

// DIDs keep their colons readable, as the other permission forms do
const encode = (s: string) => encodeURIComponent(s).replace(/%3A/g, ':')

function list(items: string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`
}
