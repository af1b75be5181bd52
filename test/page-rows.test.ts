// The account page's rows as declared: what each action needs before it runs is read from the one
// table the wrapper enforces, the way the XRPC registry's rows are checked.
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, startTestPds, type TestPds } from './harness.js'
import { accountRows } from '../src/web/account/index.js'
import { accountKit } from '../src/web/account/kit.js'

let pds: TestPds

describe('the account page as rows', () => {
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  const rows = () => accountRows(accountKit(pds.services))
  const of = (path: string) => rows().find((r) => r.method === 'post' && r.path === `/account/${path}`)

  it('declares every form post with the device form token, once per path', () => {
    const posts = rows().filter((r) => r.method === 'post')
    expect(posts.length).toBeGreaterThan(25)
    expect(posts.every((r) => r.csrf)).toBe(true)
    expect(new Set(posts.map((r) => r.path)).size).toBe(posts.length)
  })

  it('asks for a password confirmed moments ago before anything that adds or changes a credential', () => {
    const sensitive = [
      'app-passwords/create',
      'email/change-request',
      'email/change',
      'handle',
      'factors/email',
      'factors/totp/begin',
      'factors/totp/confirm',
      'factors/totp/disable',
      'factors/recovery',
      'passkeys/options',
      'passkeys/add',
      'passkeys/remove',
      'deactivate',
      'delete/request',
      'delete',
    ]
    for (const path of sensitive) expect(of(path)?.gate, path).toBe('fresh-password')
    // a download of everything, private preferences included
    expect(of('export')?.gate).toBe('fresh-password')
    // taking access away, and the password change (which asks for the current password itself)
    for (const path of ['apps/revoke', 'app-passwords/revoke', 'passkeys/rename', 'activate', 'password', 'confirm']) {
      expect(of(path)?.gate, path).toBe('signed-in')
    }
  })

  it('admits a deactivated account only to come back, take access away, confirm its password and take its data', () => {
    const whileDeactivated = rows()
      .filter((r) => r.gate !== 'none' && (r.statuses ?? ['active']).includes('deactivated'))
      .map((r) => r.path.replace('/account/', ''))
      .sort()
    expect(whileDeactivated).toEqual(['activate', 'app-passwords/revoke', 'apps/revoke', 'confirm', 'export'])
  })

  it('puts every password or code check on the login budget and every mail on the email budget', () => {
    for (const path of ['sign-in', 'sign-in/code', 'sign-in/passkey', 'confirm', 'password', 'delete'])
      expect(of(path)?.rate, path).toBe('login')
    for (const path of ['email/send-confirmation', 'email/change-request', 'delete/request']) expect(of(path)?.rate, path).toBe('email')
    expect(of('forgot')?.rate).toBe('resetPassword')
  })
})
