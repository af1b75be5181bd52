// The operator's branding (PDS_SERVICE_NAME, PDS_LOGO_URL, the colours and the links) on the
// home page, the account page, the OAuth sign-in page and every email; a bad colour stops start.
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, newAccount, startTestPds, xrpc, bearer, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { loadConfig } from '../src/config.js'

const BRAND = {
  PDS_SERVICE_NAME: 'Harbour Social',
  PDS_LOGO_URL: 'https://harbour.example/logo.png',
  PDS_PRIMARY_COLOR: '#aa3311',
  PDS_HOME_URL: 'https://harbour.example/',
  PDS_SUPPORT_URL: 'https://harbour.example/help',
  PDS_PRIVACY_POLICY_URL: 'https://harbour.example/privacy',
  PDS_TERMS_OF_SERVICE_URL: 'https://harbour.example/terms',
}

describe('branding', () => {
  let pds: TestPds
  let sink: MailSink
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink, BRAND))
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })

  it('GET / is a page naming the service, with its links and the way to /account', async () => {
    const res = await fetch(`${pds.url}/`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/html/)
    const page = await res.text()
    expect(page).toContain('<title>Home · Harbour Social</title>')
    expect(page).toContain('href="/account"')
    for (const url of [
      'https://harbour.example/logo.png',
      'https://harbour.example/help',
      'https://harbour.example/privacy',
      'https://harbour.example/terms',
    ])
      expect(page).toContain(url)
  })

  it('the account page carries the name, the logo and the colours', async () => {
    const page = await (await fetch(`${pds.url}/account`)).text()
    expect(page).toContain('id="service-name"')
    expect(page).toContain('Harbour Social')
    expect(page).toContain('id="service-logo" src="https://harbour.example/logo.png"')
    expect(page).toContain('href="/web/brand.css"')
    const css = await (await fetch(`${pds.url}/web/brand.css`)).text()
    expect(css.toLowerCase()).toContain('#aa3311')
  })

  it('every email is signed with the service name and its links', async () => {
    const acct = await newAccount(pds.url, 'brand')
    const before = sink.received.length
    const res = await xrpc(pds.url, 'com.atproto.server.requestEmailConfirmation', { method: 'POST', headers: bearer(acct.accessJwt) })
    expect(res.status).toBe(200)
    const [msg] = await sink.waitFor(before + 1).then((all) => all.slice(before))
    expect(msg.body.text).toContain('Harbour Social')
    expect(msg.body.text).toContain('Support: https://harbour.example/help')
  })

  it('refuses to start with a colour that is not one', async () => {
    const env = { ...pds.env, PDS_PRIMARY_COLOR: 'not-a-colour' }
    expect(() => loadConfig(env)).toThrow(/PDS_PRIMARY_COLOR/)
  })
})
