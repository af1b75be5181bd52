// Permission sets: an `include:<nsid>[?aud=did#service]` scope names a lexicon whose main
// definition is a `permission-set`, published by the NSID's authority. It is resolved when an app
// asks for it (an unresolvable set refuses the request) and replaced by the permissions it lists
// once the user signs in, so tokens carry only concrete permissions and a refresh keeps them.
// What a set may grant follows @atproto/oauth-scopes: only `repo:` and `rpc:` permissions under
// the set's own NSID namespace survive (others are dropped); `inheritAud` rpc permissions take
// the include's `aud`. Spaces add `space` permissions, whose space type is held to the same
// namespace rule (their collections are not).
import { IncludeScope, type LexiconPermissionSet } from '@atproto/oauth-scopes'
import type { PublishedLexicon } from '../lexicon/documents.js'
import { spaceScopesOfPermissionSet } from '../space/scope.js'
import { LexiconResolutionError, LexiconResolver, type LexiconResolverDeps } from '../lexicon/resolver.js'

export class PermissionSetError extends Error {}

/** a set as the consent page shows it */
export type IncludedSet = { nsid: string; title?: string; detail?: string; permissions: string[] }

/** resolves and validates permission sets (through the cached lexicon resolver) */
export class PermissionSets {
  /** the resolver (and its cache) space type declarations share */
  readonly lexicons: LexiconResolver

  constructor(deps: LexiconResolverDeps) {
    this.lexicons = new LexiconResolver(deps)
  }

  /** the set `nsid` names; PermissionSetError saying why when it cannot be had */
  async resolve(nsid: string): Promise<LexiconPermissionSet> {
    let doc: PublishedLexicon
    try {
      doc = await this.lexicons.resolve(nsid)
    } catch (err) {
      if (err instanceof LexiconResolutionError)
        throw new PermissionSetError(`Permission set ${nsid} could not be resolved: ${err.message}`)
      throw err
    }
    const main = doc.defs.main
    if (main?.type !== 'permission-set') throw new PermissionSetError(`${nsid} is not a permission set`)
    return main
  }
}

/** true for a scope value of the `include:` form (well-formed or not) */
export const isIncludeScope = (s: string) => s.startsWith('include:')

/**
 * `scope` with every `include:` replaced by the permissions its set grants (duplicates dropped);
 * PermissionSetError when one is malformed or does not resolve. A scope without `include:` comes
 * back unchanged without any lookup.
 */
export async function expandPermissionSets(scope: string, sets: PermissionSets): Promise<string> {
  const asked = scope.split(' ').filter(Boolean)
  if (!asked.some(isIncludeScope)) return scope
  const out = new Set<string>()
  for (const s of asked) {
    if (!isIncludeScope(s)) {
      out.add(s)
      continue
    }
    const include = parseInclude(s)
    for (const p of grantsOf(include, await sets.resolve(include.nsid))) out.add(p)
  }
  return [...out].join(' ')
}

/** per `include:` in `scope`: the set's title and detail (in the best language of `acceptLanguage`) and what it grants */
export async function describePermissionSets(scope: string, sets: PermissionSets, acceptLanguage?: string): Promise<IncludedSet[]> {
  const langs = preferredLanguages(acceptLanguage)
  const out: IncludedSet[] = []
  for (const s of scope.split(' ').filter(isIncludeScope)) {
    const include = parseInclude(s)
    const set = await sets.resolve(include.nsid)
    out.push({
      nsid: include.nsid,
      title: localized(set.title, set['title:lang'], langs),
      detail: localized(set.detail, set['detail:lang'], langs),
      permissions: grantsOf(include, set),
    })
  }
  return out
}

/** what one `include:` grants: the library's reading of the set, then its `space` permissions */
function grantsOf(include: IncludeScope, set: LexiconPermissionSet): string[] {
  return [...include.toScopes(set), ...spaceScopesOfPermissionSet(include.nsid, set.permissions)]
}

function parseInclude(s: string): IncludeScope {
  const include = IncludeScope.fromString(s)
  if (!include) throw new PermissionSetError(`Malformed scope ${s}`)
  return include
}

/** language tags of an Accept-Language header, most preferred first (q=0 left out) */
export function preferredLanguages(header: string | undefined): string[] {
  if (!header) return []
  return header
    .split(',')
    .map((part, i) => {
      const [tag, ...params] = part.trim().split(';')
      const q = params.map((p) => /^\s*q=([\d.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined)
      return { tag: tag.trim().toLowerCase(), q: q === undefined ? 1 : Number(q), i }
    })
    .filter((l) => l.tag && l.tag !== '*' && l.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i)
    .map((l) => l.tag)
}

/** `text` in the first of `langs` it has: an exact tag first, then its primary language, then the default text */
export function localized(text: string | undefined, byLang: { readonly [lang: string]: string | undefined } | undefined, langs: string[]) {
  if (byLang) {
    const entries = Object.entries(byLang).filter((e): e is [string, string] => typeof e[1] === 'string')
    for (const lang of langs) {
      const exact = entries.find(([k]) => k.toLowerCase() === lang)
      if (exact) return exact[1]
      const primary = lang.split('-')[0]
      const loose = entries.find(([k]) => k.toLowerCase().split('-')[0] === primary)
      if (loose) return loose[1]
    }
  }
  return text
}
