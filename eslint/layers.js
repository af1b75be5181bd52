// The server's layers, and the two lint rules that hold src/ to them: `layers/layering` (a module
// imports its own unit or units of lower layers only) and `layers/no-cycle` (no import cycles).
// Type-only, re-export and dynamic imports count like any other, in relative and `#src/` form.
import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'

// Lowest first. Each layer names its units: a unit is a folder (`db/`) or a file under src/, and
// one or more of them make a unit. The longest matching path decides a file's unit.
export const LAYERS = [
  {
    kernel: [
      'config.ts',
      'config-values.ts',
      'errors.ts',
      'logger.ts',
      'limits.ts',
      'metrics.ts',
      'outbound.ts',
      'node-http.ts',
      'runtime.ts',
      'startup-errors.ts',
      'budgets.ts',
    ],
  },
  { net: ['net/'], encoding: ['encoding/'], space: ['space/'], html: ['web/html.ts'], 'json-text': ['api/json-text.ts'] },
  { patches: ['patches/'] },
  { db: ['db/'] },
  { sequencer: ['sequencer/'] },
  { identity: ['identity/'], mail: ['mail/'], lexicon: ['lexicon/documents.ts'] },
  { jwt: ['jwt/'], 'local-plc': ['local-plc.ts'], 'proxy-targets': ['proxy/targets.ts'] },
  { repo: ['repo/'] },
  { blob: ['blob/'] },
  { 'space-repo': ['space/repo-read.ts', 'space/repo-write.ts'] },
  { account: ['account/'] },
  { move: ['move/'], 'lexicon-resolver': ['lexicon/'] },
  { oauth: ['oauth/'] },
  { web: ['web/'] },
  { context: ['context.ts'] },
  {
    // the space host's key resolution and attestation check space credentials with auth/
    auth: ['auth/', 'space/host.ts', 'space/attestation.ts'],
    'oauth-server': [
      'oauth/routes.ts',
      'oauth/authorize.ts',
      'oauth/authorize-kit.ts',
      'oauth/factor-steps.ts',
      'oauth/factor-page.ts',
      'oauth/page.ts',
    ],
  },
  {
    'read-after-write': ['read-after-write/'],
    'space-handlers': ['space/repo-handlers.ts'],
  },
  { proxy: ['proxy/'] },
  { api: ['api/'], 'account-page': ['web/account/'], 'well-known': ['well-known.ts'], cors: ['cors.ts'] },
  { cli: ['cli/'] },
  { server: ['server.ts', 'start/'] },
  { bin: ['bin.ts'] },
]

const units = LAYERS.flatMap((layer, rank) => Object.entries(layer).flatMap(([name, paths]) => paths.map((path) => ({ name, path, rank }))))
units.sort((a, b) => b.path.length - a.path.length)

/** the unit of a path relative to src/ (with `/` separators), or undefined */
export function unitOf(path) {
  return units.find((u) => (u.path.endsWith('/') ? path.startsWith(u.path) : path === u.path))
}

const toPosix = (p) => p.split(sep).join('/')

/** the .ts file an import specifier names, or undefined when it is a package or missing */
export function resolveImport(spec, fromFile, srcRoot) {
  let base
  if (spec.startsWith('#src/')) base = join(srcRoot, spec.slice(5))
  else if (spec.startsWith('.')) base = resolve(dirname(fromFile), spec)
  else return undefined
  const ts = base.replace(/\.js$/, '.ts')
  for (const candidate of [ts, base, join(base, 'index.ts')]) if (existsSync(candidate) && statSync(candidate).isFile()) return candidate
  return undefined
}

const sourcesOf = (node) => {
  if (node.type === 'ImportDeclaration' || node.type === 'ExportAllDeclaration' || node.type === 'ExportNamedDeclaration')
    return node.source
  if (node.type === 'ImportExpression') return node.source
  if (node.type === 'TSImportType') return node.argument?.type === 'TSLiteralType' ? node.argument.literal : node.argument
  return undefined
}

function eachImport(context, check) {
  const visit = (node) => {
    const source = sourcesOf(node)
    if (source?.type === 'Literal' && typeof source.value === 'string') check(node, source.value)
  }
  return {
    ImportDeclaration: visit,
    ExportAllDeclaration: visit,
    ExportNamedDeclaration: visit,
    ImportExpression: visit,
    TSImportType: visit,
  }
}

const srcRootOf = (context) => resolve(context.cwd ?? process.cwd(), context.options[0]?.root ?? 'src')

const layering = {
  meta: {
    type: 'problem',
    docs: { description: 'imports go down the layers of eslint/layers.js' },
    schema: [{ type: 'object', properties: { root: { type: 'string' } }, additionalProperties: false }],
    messages: {
      upward: "'{{from}}' ({{fromUnit}}) may not import '{{to}}' ({{toUnit}}): {{why}}",
      unplaced: "'{{from}}' is in no unit of the layer table in eslint/layers.js: add its folder there",
    },
  },
  create(context) {
    const srcRoot = srcRootOf(context)
    const file = context.filename
    const from = toPosix(relative(srcRoot, file))
    if (from.startsWith('..') || from.startsWith('generated/')) return {}
    const fromUnit = unitOf(from)
    if (!fromUnit) {
      return { Program: (node) => context.report({ node, messageId: 'unplaced', data: { from } }) }
    }
    return eachImport(context, (node, spec) => {
      const target = resolveImport(spec, file, srcRoot)
      if (!target) return
      const to = toPosix(relative(srcRoot, target))
      if (to.startsWith('..') || to.startsWith('generated/')) return
      const toUnit = unitOf(to)
      if (!toUnit || toUnit.name === fromUnit.name || toUnit.rank < fromUnit.rank) return
      const why = toUnit.rank === fromUnit.rank ? 'they are peers in one layer' : 'it is in a higher layer'
      context.report({ node, messageId: 'upward', data: { from, fromUnit: fromUnit.name, to, toUnit: toUnit.name, why } })
    })
  },
}

// The import graph read from disk for no-cycle; a file is reread when it changes.
const graph = new Map()
const IMPORT_RE = /(?:^|[\s;}])(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g
function importsOf(file, srcRoot) {
  const mtime = statSync(file).mtimeMs
  const hit = graph.get(file)
  if (hit && hit.mtime === mtime) return hit.deps
  const deps = []
  for (const m of readFileSync(file, 'utf8').matchAll(IMPORT_RE)) {
    const target = resolveImport(m[1] ?? m[2], file, srcRoot)
    if (target) deps.push(target)
  }
  graph.set(file, { mtime, deps })
  return deps
}

/** a path of files from `start` back to `goal`, or undefined */
function pathTo(start, goal, srcRoot) {
  const seen = new Set()
  const walk = (file, trail) => {
    if (file === goal) return trail
    if (seen.has(file)) return undefined
    seen.add(file)
    for (const dep of importsOf(file, srcRoot)) {
      const found = walk(dep, [...trail, dep])
      if (found) return found
    }
    return undefined
  }
  return walk(start, [start])
}

const noCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'no import cycles under src/' },
    schema: [{ type: 'object', properties: { root: { type: 'string' } }, additionalProperties: false }],
    messages: { cycle: 'import cycle: {{cycle}}' },
  },
  create(context) {
    const srcRoot = srcRootOf(context)
    const file = context.filename
    if (toPosix(relative(srcRoot, file)).startsWith('..')) return {}
    return eachImport(context, (node, spec) => {
      const target = resolveImport(spec, file, srcRoot)
      if (!target || toPosix(relative(srcRoot, target)).startsWith('..')) return
      const trail = pathTo(target, file, srcRoot)
      if (trail)
        context.report({
          node,
          messageId: 'cycle',
          data: { cycle: [file, ...trail].map((f) => toPosix(relative(srcRoot, f))).join(' -> ') },
        })
    })
  },
}

export const plugin = { meta: { name: 'layers' }, rules: { layering, 'no-cycle': noCycle } }

/** the config block eslint.config.js and the rule's own test use */
export const layersConfig = (root = 'src') => ({
  files: [`${root}/**/*.ts`],
  ignores: [`${root}/generated/**`],
  plugins: { layers: plugin },
  rules: { 'layers/layering': ['error', { root }], 'layers/no-cycle': ['error', { root }] },
})
