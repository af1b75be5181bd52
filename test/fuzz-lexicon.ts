// fast-check arbitraries for XRPC calls, derived from the lexicons in lexicons/: values shaped as a
// method's parameters or input schema asks, mixed with junk (wrong types, huge and odd strings, deep
// nesting, dropped required fields, extra fields). Every DID, handle and URL they hold names a
// reserved `.invalid`/`.test` host or a DID the caller supplies, so no call sends the server
// anywhere but loopback.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { handlerMethods } from '../codegen/handlers.ts'

type Schema = { type: string; [k: string]: any }
export type Lexicon = { id: string; defs: Record<string, Schema> }

const LEX_DIR = join(import.meta.dirname, '..', 'lexicons')

export function loadLexicon(nsid: string): Lexicon {
  return JSON.parse(readFileSync(join(LEX_DIR, ...nsid.split('.')) + '.json', 'utf8'))
}

/** every method a handler file under src/api/ serves */
export const servedMethods = (): string[] => handlerMethods()

/** identifiers the generated values draw on: the caller's own account, so handlers reach real rows */
export type Pool = { dids: string[]; handles: string[]; emails: string[]; uris: string[]; cids: string[] }

const B32 = 'abcdefghijklmnopqrstuvwxyz234567'
const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,12}[a-z0-9]$/)
const b32 = (n: number) => fc.array(fc.constantFrom(...B32), { minLength: n, maxLength: n }).map((a) => a.join(''))
const fakeCid = b32(52).map((s) => 'bafyrei' + s.slice(0, 52))
const tid = fc.array(fc.constantFrom(...'234567abcdefghij'), { minLength: 12, maxLength: 12 }).map((a) => '3' + a.join(''))

/** odd printable-ASCII strings (the HTTP client refuses other header bytes) */
export const ascii = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 80 })

const weird = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  '\ud800',
  '\udfff\ud800',
  '🦋'.repeat(400),
  'e\u0301'.repeat(500),
  'a'.repeat(70_000),
  'x'.repeat(2_000_000),
  '../../../etc/passwd',
  'did:',
  'did:plc:',
  'did:web:',
  'at://',
  'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/../x',
  '%00',
  '__proto__',
  'constructor',
  'NaN',
  '-1',
  '1e400',
  '99999999999999999999999',
  'null',
  'bafyrei',
  'Z'.repeat(64),
)

function nested(depth: number, kind: 'array' | 'object'): unknown {
  let v: unknown = 1
  for (let i = 0; i < depth; i++) v = kind === 'array' ? [v] : { a: v }
  return v
}

/** JSON text nested far deeper than a value the test could build and serialize itself */
export const deepJson = fc
  .tuple(fc.integer({ min: 1_000, max: 200_000 }), fc.constantFrom('[', '{"a":'), fc.constantFrom('record', 'preferences', 'writes', 'a'))
  .map(
    ([n, open, key]) => `{"repo":"x","collection":"app.bsky.feed.post","${key}":${open.repeat(n)}1${(open === '[' ? ']' : '}').repeat(n)}}`,
  )

/** values of the wrong shape for anything */
export const junk: fc.Arbitrary<unknown> = fc.oneof(
  weird,
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(null, true, false, 0, -1, 1.5, -0, 1e308, Number.MAX_SAFE_INTEGER + 2),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.tuple(fc.integer({ min: 50, max: 300 }), fc.constantFrom('array' as const, 'object' as const)).map(([n, k]) => nested(n, k)),
  fc.constantFrom({ $type: 'blob' }, { $link: 'nope' }, { $bytes: '!!!' }, { $type: 42 }, { __proto__: { admin: true } }, [], {}),
  fc.array(fc.constantFrom(1, 'a', null), { minLength: 1000, maxLength: 20_000 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 5 }),
)

const uriFor = (pool: Pool) =>
  fc.oneof(
    fc.constantFrom(...pool.uris),
    fc
      .tuple(fc.constantFrom(...pool.dids), fc.constantFrom('app.bsky.feed.post', 'app.bsky.actor.profile', 'x.y.z'), tid)
      .map(([d, c, r]) => `at://${d}/${c}/${r}`),
  )

function stringFor(s: Schema, pool: Pool): fc.Arbitrary<string> {
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as string[]))
  const did = fc.oneof(
    fc.constantFrom(...pool.dids),
    b32(24).map((x) => `did:plc:${x}`),
    label.map((l) => `did:web:${l}.invalid`),
  )
  const handle = fc.oneof(
    fc.constantFrom(...pool.handles),
    label.map((l) => `${l}.test`),
    label.map((l) => `${l}.invalid`),
  )
  switch (s.format) {
    case 'did':
      return did
    case 'handle':
      return handle
    case 'at-identifier':
      return fc.oneof(did, handle)
    case 'at-uri':
      return uriFor(pool)
    case 'nsid':
      return fc.constantFrom(
        'app.bsky.feed.post',
        'app.bsky.actor.profile',
        'com.atproto.server.createAccount',
        'com.example.fuzz',
        'a.b.c',
      )
    case 'cid':
      return fc.oneof(fc.constantFrom(...pool.cids), fakeCid)
    case 'datetime':
      return fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString())
    case 'record-key':
    case 'tid':
      return fc.oneof(tid, fc.constantFrom('self', '.', '..', 'a:b', '~'))
    case 'uri':
      return label.map((l) => `https://${l}.invalid/`)
    case 'language':
      return fc.constantFrom('en', 'pt-BR', 'x-klingon', '')
    default:
      break
  }
  if (Array.isArray(s.knownValues)) return fc.oneof(fc.constantFrom(...(s.knownValues as string[])), fc.string({ maxLength: 10 }))
  return fc.oneof(
    fc.string({ maxLength: Math.min(s.maxLength ?? 30, 30) }),
    fc.constantFrom(...pool.emails),
    fc.string({ unit: 'grapheme', maxLength: 30 }),
  )
}

/** a record for `unknown` fields (createRecord's record, applyWrites' values, putPreferences' items) */
const recordFor = (pool: Pool): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.record(
      {
        $type: fc.constantFrom(
          'app.bsky.feed.post',
          'app.bsky.feed.like',
          'app.bsky.actor.profile',
          'com.example.fuzz',
          'app.bsky.actor.defs#adultContentPref',
          '',
        ),
        text: fc.oneof(fc.string({ unit: 'grapheme', maxLength: 400 }), junk),
        createdAt: fc.oneof(stringFor({ type: 'string', format: 'datetime' }, pool), junk),
        subject: fc.oneof(fc.record({ uri: uriFor(pool), cid: stringFor({ type: 'string', format: 'cid' }, pool) }), junk),
        embed: fc.oneof(
          fc.record({
            $type: fc.constant('app.bsky.embed.images'),
            images: fc.array(fc.record({ alt: fc.string(), image: blobFor(pool) }), { maxLength: 5 }),
          }),
          junk,
        ),
        enabled: fc.oneof(fc.boolean(), junk),
        extra: junk,
      },
      { requiredKeys: ['$type'] },
    ),
    junk,
  )

const blobFor = (pool: Pool) =>
  fc.oneof(
    fc.record({
      $type: fc.constant('blob'),
      ref: fc.record({ $link: stringFor({ type: 'string', format: 'cid' }, pool) }),
      mimeType: fc.constantFrom('image/png', 'text/plain', '', '*/*'),
      size: fc.oneof(fc.nat(), junk),
    }),
    junk,
  )

/** arbitraries for one lexicon document, resolving `ref`s into it and the other exported lexicons */
export class LexArbitraries {
  private docs = new Map<string, Lexicon>()

  /** `clean`: shaped values only, nothing dropped or added (requests that reach the handler) */
  constructor(
    private pool: Pool,
    private clean = false,
  ) {}

  private resolve(ref: string, from: string): Schema {
    const [nsid, name] = ref.startsWith('#') ? [from, ref.slice(1)] : ref.replace(/^lex:/, '').split('#')
    let doc = this.docs.get(nsid)
    if (!doc) this.docs.set(nsid, (doc = loadLexicon(nsid)))
    return { ...doc.defs[name ?? 'main'], $nsid: nsid, $name: name ?? 'main' }
  }

  /** mostly shaped like `s`, sometimes junk */
  value(s: Schema, from: string, depth = 0): fc.Arbitrary<unknown> {
    if (depth > 6) return junk
    if (this.clean) return this.shaped(s, from, depth)
    return fc.oneof({ weight: 5, arbitrary: this.shaped(s, from, depth) }, { weight: 1, arbitrary: junk })
  }

  shaped(s: Schema, from: string, depth: number): fc.Arbitrary<unknown> {
    const pool = this.pool
    switch (s.type) {
      case 'string':
        return stringFor(s, pool)
      case 'integer':
        return Array.isArray(s.enum) ? fc.constantFrom(...s.enum) : fc.integer({ min: s.minimum ?? -5, max: s.maximum ?? 10_000 })
      case 'boolean':
        return fc.boolean()
      case 'array':
        return fc.array(this.value(s.items, from, depth + 1), { maxLength: Math.min(s.maxLength ?? 4, 4) })
      case 'unknown':
        return recordFor(pool)
      case 'bytes':
        return fc.uint8Array({ maxLength: 64 }).map((b) => ({ $bytes: Buffer.from(b).toString('base64').replace(/=+$/, '') }))
      case 'cid-link':
        return stringFor({ type: 'string', format: 'cid' }, pool).map(($link) => ({ $link }))
      case 'blob':
        return blobFor(pool)
      case 'token':
        return fc.constant(`${from}#${s.$name ?? 'token'}`)
      case 'ref': {
        const target = this.resolve(s.ref, from)
        return this.shaped(target, target.$nsid, depth + 1)
      }
      case 'union': {
        const options = (s.refs as string[]).map((ref) => {
          const target = this.resolve(ref, from)
          const $type = `${target.$nsid}#${target.$name}`.replace(/#main$/, '')
          return this.shaped(target, target.$nsid, depth + 1).map((v) =>
            v && typeof v === 'object' && !Array.isArray(v) ? { $type, ...v } : v,
          )
        })
        return options.length ? fc.oneof(...options) : junk
      }
      case 'object':
      case 'params':
        return this.object(s, from, depth)
      default:
        return junk
    }
  }

  /** every property of `s` (required ones present), then maybe one required dropped and an extra added */
  object(s: Schema, from: string, depth: number): fc.Arbitrary<Record<string, unknown>> {
    const props: Record<string, fc.Arbitrary<unknown>> = {}
    for (const [k, v] of Object.entries((s.properties ?? {}) as Record<string, Schema>)) props[k] = this.value(v, from, depth + 1)
    const required = ((s.required ?? []) as string[]).filter((k) => k in props)
    const record = fc.record(props, { requiredKeys: required })
    if (this.clean) return record
    const sometimes = <T>(a: fc.Arbitrary<T>) => fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: a })
    return fc.tuple(record, sometimes(fc.nat()), sometimes(fc.tuple(fc.string({ maxLength: 12 }), junk))).map(([r, drop, extra]) => {
      const out: Record<string, unknown> = { ...r }
      if (drop !== null && required.length) delete out[required[drop % required.length]]
      if (extra) out[extra[0]] = extra[1]
      return out
    })
  }
}
