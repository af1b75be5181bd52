// The layering rules refuse an import against the layers (type-only, re-export, dynamic, relative or
// `#src/`) and an import cycle, and let an import down the layers through.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { ESLint, type Linter } from 'eslint'
import tseslint from 'typescript-eslint'
import { afterAll, describe, expect, it } from 'vitest'

const root = new URL('..', import.meta.url).pathname
const layersPath = pathToFileURL(join(root, 'eslint/layers.js')).href
const { layersConfig } = (await import(layersPath)) as { layersConfig: (root?: string) => Linter.Config }

const lint = async (cwd: string, file: string, code: string) => {
  const eslint = new ESLint({
    cwd,
    overrideConfigFile: true,
    overrideConfig: [{ languageOptions: { parser: tseslint.parser } }, layersConfig()],
  })
  const [result] = await eslint.lintText(code, { filePath: join(cwd, file) })
  return result.messages.map((m) => `${m.ruleId}: ${m.message}`)
}

describe('layering lint rules', () => {
  it('refuses config.ts importing a domain module, even type-only', async () => {
    const errors = await lint(root, 'src/config.ts', "import type { AccountRow } from './account/store.js'\n")
    expect(errors).toContainEqual(
      expect.stringMatching(/^layers\/layering: 'config\.ts' \(kernel\) may not import 'account\/store\.ts' \(account\)/),
    )
  })

  it('refuses db/ importing auth/ through the #src/ alias, a re-export and a dynamic import', async () => {
    const errors = await lint(
      root,
      'src/db/example.ts',
      [
        "import { createVerifier } from '#src/auth/verifier.js'",
        "export { rowFor } from '../auth/registry.js'",
        "export const load = () => import('../auth/rate-limits.js')",
        '',
      ].join('\n'),
    )
    expect(errors).toHaveLength(3)
    for (const e of errors)
      expect(e).toMatch(/^layers\/layering: 'db\/example\.ts' \(db\) may not import 'auth\/.*' \(auth\): it is in a higher layer/)
  })

  it('refuses auth/ importing the OAuth server and peers in one layer importing each other', async () => {
    expect(await lint(root, 'src/auth/example.ts', "import { oauthRoutes } from '../oauth/routes.js'\n")).toEqual([
      expect.stringMatching(/\(oauth-server\): they are peers in one layer/),
    ])
    expect(await lint(root, 'src/identity/example.ts', "import { createMailer } from '#src/mail/index.js'\n")).toEqual([
      expect.stringMatching(/\(mail\): they are peers in one layer/),
    ])
  })

  it('lets imports down the layers and within a unit through', async () => {
    const code = [
      "import type { Db } from '#src/db/index.js'",
      "import { xrpcError } from '../errors.js'",
      "import { getAccount } from '../account/store.js'",
      "import { prepareRecordWrite } from '../repo/prepare.js'",
      "import { rowFor } from './registry.js'",
      '',
    ].join('\n')
    expect(await lint(root, 'src/auth/example.ts', code)).toEqual([])
  })

  it('refuses a folder missing from the layer table', async () => {
    expect(await lint(root, 'src/nowhere/example.ts', 'export const x = 1\n')).toEqual([
      expect.stringMatching(/in no unit of the layer table/),
    ])
  })

  const tmp = mkdtempSync(join(tmpdir(), 'pds-layering-'))
  afterAll(() => rmSync(tmp, { recursive: true, force: true }))

  it('refuses an import cycle, type-only imports included', async () => {
    mkdirSync(join(tmp, 'src/account'), { recursive: true })
    writeFileSync(join(tmp, 'src/account/a.ts'), "import type { B } from './b.js'\nexport type A = { b?: B }\n")
    writeFileSync(join(tmp, 'src/account/b.ts'), "import type { A } from './a.js'\nexport type B = { a?: A }\n")
    writeFileSync(join(tmp, 'src/account/c.ts'), "import type { A } from './a.js'\nexport type C = A\n")
    const cyclic = await lint(tmp, 'src/account/a.ts', "import type { B } from './b.js'\nexport type A = { b?: B }\n")
    expect(cyclic).toEqual(['layers/no-cycle: import cycle: account/a.ts -> account/b.ts -> account/a.ts'])
    expect(await lint(tmp, 'src/account/c.ts', "import type { A } from './a.js'\nexport type C = A\n")).toEqual([])
  })
})
