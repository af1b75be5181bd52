// The typed client as another project installs it: `npm pack` of this package, `npm install` of
// the tarball into a scratch project (its dependencies from npm's cache, else the registry), a
// TypeScript file importing `pds/client` checked against the shipped declarations, and a call to a
// server on loopback from that project.
import { execFile, execFileSync } from 'node:child_process'
import { promisify } from 'node:util'
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, startTestPds, tempDir, type TestPds } from './harness.js'

const NODE_BIN = resolve(process.execPath, '..')
const sh = (cmd: string, args: string[], cwd: string) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, PATH: `${NODE_BIN}:${process.env.PATH}` }, timeout: 400_000 })

describe('the packed typed client', { timeout: 600_000 }, () => {
  let pds: TestPds
  const dir = tempDir('pds-pack-')
  const project = join(dir, 'app')
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('packs with dist/, installs into another project, type-checks and calls the server', async () => {
    // dist/ is built by `make test`; prepack would build it again
    sh('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', dir], process.cwd())
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!
    const listing = sh('tar', ['-tzf', join(dir, tarball)], dir)
    expect(listing).toContain('package/dist/generated/client/index.js')
    expect(listing).toContain('package/dist/generated/client/index.d.ts')
    expect(listing).not.toContain('package/src/')
    expect(listing).not.toContain('package/test/')

    mkdirSync(project)
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
    sh('npm', ['install', join(dir, tarball), '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', '--silent'], project)

    // the README's example, as an app writes it
    writeFileSync(
      join(project, 'main.ts'),
      `import { AtpBaseClient } from 'pds/client'

const client = new AtpBaseClient({ service: process.argv[2] })
const { data } = await client.com.atproto.server.describeServer()
const did: string = data.did
const domains: string[] = data.availableUserDomains
console.log(JSON.stringify({ did, domains }))
`,
    )
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          skipLibCheck: true,
          types: [],
        },
        files: ['main.ts', 'node.d.ts'],
      }),
    )
    writeFileSync(join(project, 'node.d.ts'), 'declare const process: { argv: string[] }\n')
    // the declarations are what a mistaken call is checked against
    sh(process.execPath, [resolve('node_modules/typescript/bin/tsc'), '-p', '.'], project)
    writeFileSync(
      join(project, 'wrong.ts'),
      `import { AtpBaseClient } from 'pds/client'\nconst n: number = (await new AtpBaseClient({ service: '' }).com.atproto.server.describeServer()).data.did\nexport { n }\n`,
    )
    let diagnostics = ''
    try {
      sh(
        process.execPath,
        [
          resolve('node_modules/typescript/bin/tsc'),
          '--noEmit',
          '--strict',
          '--module',
          'nodenext',
          '--target',
          'es2022',
          '--skipLibCheck',
          'wrong.ts',
        ],
        project,
      )
    } catch (err) {
      // tsc prints its diagnostics on stdout
      diagnostics = String((err as { stdout?: string }).stdout)
    }
    expect(diagnostics).toMatch(/Type 'string' is not assignable to type 'number'/)

    sh(process.execPath, [resolve('node_modules/typescript/bin/tsc'), '-p', '.', '--outDir', 'out'], project)
    // asynchronously: the server answering it runs in this process
    const run = await promisify(execFile)(process.execPath, [join(project, 'out', 'main.js'), pds.url], { cwd: project, timeout: 60_000 })
    const out = JSON.parse(run.stdout)
    expect(out).toEqual({ did: 'did:web:localhost', domains: ['.test'] })
  })
})
