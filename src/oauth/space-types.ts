// `space:` permissions at the authorization server. A concrete space type is declared by a lexicon
// whose main definition has type `space` (its name, its collections), resolved and cached like a
// permission set. An app's request is refused when a permission is malformed or names a type
// whose declaration cannot be had; the consent page shows the declared name and a named
// authority's verified handle; tokens carry the permission rewritten for the user (`self` as the
// DID, the declared collections filled in), at the code exchange and again at every refresh.
import type { SpaceDeclaration } from '../lexicon/documents.js'
import { LexiconResolutionError, type LexiconResolver } from '../lexicon/resolver.js'
import { resolveIdentity } from '../identity/identity.js'
import { localized, preferredLanguages } from './permission-sets.js'
import {
  formatSpaceScope,
  isSpaceScope,
  parseSpaceScope,
  rewriteSpaceScope,
  SpaceScopeError,
  type ScopeWordsContext,
  type SpaceScope,
} from '../space/scope.js'

export class SpaceTypeError extends Error {}

/** resolves space type declarations (through the cached lexicon resolver) */
export class SpaceTypes {
  constructor(private lexicons: LexiconResolver) {}

  /** the declaration of `nsid`; SpaceTypeError saying why when it cannot be had */
  async resolve(nsid: string): Promise<SpaceDeclaration> {
    let main
    try {
      main = (await this.lexicons.resolve(nsid)).defs.main
    } catch (err) {
      if (err instanceof LexiconResolutionError) throw new SpaceTypeError(`Space type ${nsid} could not be resolved: ${err.message}`)
      throw err
    }
    if (main?.type !== 'space') throw new SpaceTypeError(`${nsid} is not a space type declaration`)
    return main
  }
}

/** the `space:` values of a scope string, parsed; SpaceTypeError naming a malformed one */
function spaceScopes(scope: string): Array<{ value: string; parsed: SpaceScope }> {
  return scope
    .split(' ')
    .filter(isSpaceScope)
    .map((value) => {
      try {
        return { value, parsed: parseSpaceScope(value) }
      } catch (err) {
        if (err instanceof SpaceScopeError) throw new SpaceTypeError(`Malformed scope ${value}: ${err.message}`)
        throw err
      }
    })
}

/** every `space:` value of `scope` (include: already expanded) is well formed and its concrete type resolves */
export async function checkSpaceScopes(scope: string, types: SpaceTypes): Promise<void> {
  for (const { parsed } of spaceScopes(scope)) if (parsed.type !== '*') await types.resolve(parsed.type)
}

/**
 * The scope a token carries for `did`: each `space:` value rewritten (`self` → the DID, the
 * declared collections for a concrete type that names none); other values as granted.
 * SpaceTypeError when a declaration needed for that cannot be resolved.
 */
export async function tokenScope(scope: string, did: string, types: SpaceTypes): Promise<string> {
  if (!scope.split(' ').some(isSpaceScope)) return scope
  const out: string[] = []
  for (const value of scope.split(' ').filter(Boolean)) {
    if (!isSpaceScope(value)) {
      out.push(value)
      continue
    }
    const [{ parsed }] = spaceScopes(value)
    const declared = parsed.collections === undefined && parsed.type !== '*' ? (await types.resolve(parsed.type)).collections : undefined
    try {
      out.push(formatSpaceScope(rewriteSpaceScope(parsed, did, declared)))
    } catch (err) {
      if (err instanceof SpaceScopeError) throw new SpaceTypeError(err.message)
      throw err
    }
  }
  return [...new Set(out)].join(' ')
}

/** what the consent page needs to word `space:` values: declared names by type, verified handles by DID */
export type SpaceWords = { typeNames: Record<string, string>; handles: Record<string, string> }

type HandleDeps = Parameters<typeof resolveIdentity>[0]

/**
 * names and handles for the `space:` values of `scope` (include: already expanded), each declared
 * name in the best language of `acceptLanguage` the declaration has; what cannot be had is left out
 */
export async function spaceWords(scope: string, types: SpaceTypes, deps: HandleDeps, acceptLanguage?: string): Promise<SpaceWords> {
  const langs = preferredLanguages(acceptLanguage)
  const out: SpaceWords = { typeNames: {}, handles: {} }
  for (const value of scope.split(' ').filter(isSpaceScope)) {
    let parsed: SpaceScope
    try {
      parsed = parseSpaceScope(value)
    } catch {
      continue
    }
    if (parsed.type !== '*' && !(parsed.type in out.typeNames)) {
      const declared = await types.resolve(parsed.type).catch(() => undefined)
      if (declared) out.typeNames[parsed.type] = localized(declared.name, declared['name:lang'], langs) ?? declared.name
    }
    const authority = parsed.authority
    if (authority !== 'self' && authority !== '*' && !(authority in out.handles)) {
      // a handle the DID's document claims and that resolves back to it; the DID otherwise
      const identity = await resolveIdentity(deps, authority).catch(() => undefined)
      if (identity && identity.handle !== 'handle.invalid') out.handles[authority] = identity.handle
    }
  }
  return out
}

/** the context describeSpaceScope takes, for one permission */
export const wordsContext = (s: SpaceScope, words: SpaceWords | undefined): ScopeWordsContext => ({
  typeName: words?.typeNames[s.type],
  authorityHandle: words?.handles[s.authority],
})
