// The one layout of the server's pages: the service's logo and name at the top (linking to its
// home page when the operator set one), the page in <main>, and the links the operator configured
// (home, support, privacy policy, terms of service) at the bottom, the last two the same ones
// describeServer announces. Colours the operator chose come from a stylesheet of their own
// (brand.css), loaded after the main one. Every page is a plain HTML form; a page may add a
// script of the server's own (passkeys need the browser's WebAuthn API), never an inline one.
import type { Config } from '../config.js'
import { html, type SafeHtml } from './html.js'

export const STYLESHEET_PATH = '/web/style.css'
export const BRAND_STYLESHEET_PATH = '/web/brand.css'

/** what every page shows about the server */
export type ServerInfo = {
  name: string
  logoUrl?: string
  homeUrl?: string
  supportUrl?: string
  privacyPolicy?: string
  termsOfService?: string
  /** the operator chose colours or a logo: brand.css styles them */
  brandCss: boolean
}

export function serverInfo(config: Pick<Config, 'branding'>): ServerInfo {
  const b = config.branding
  return {
    name: b.name,
    logoUrl: b.logoUrl,
    homeUrl: b.homeUrl,
    supportUrl: b.supportUrl,
    privacyPolicy: b.privacyPolicyUrl,
    termsOfService: b.termsOfServiceUrl,
    brandCss: !!b.logoUrl || Object.keys(b.colors).length > 0,
  }
}

export function layout(p: { title: string; server: ServerInfo; body: SafeHtml; scripts?: string[]; wide?: boolean }): SafeHtml {
  const s = p.server
  const links = [
    s.homeUrl && html`<li><a href="${s.homeUrl}" id="home-link">${s.name}</a></li>`,
    s.supportUrl && html`<li><a href="${s.supportUrl}" id="support-link">Support</a></li>`,
    s.privacyPolicy && html`<li><a href="${s.privacyPolicy}" id="privacy-link">Privacy policy</a></li>`,
    s.termsOfService && html`<li><a href="${s.termsOfService}" id="terms-link">Terms of service</a></li>`,
  ].filter(Boolean) as SafeHtml[]
  const brand = html`${s.logoUrl ? html`<img class="logo" id="service-logo" src="${s.logoUrl}" alt="" />` : ''}<span id="service-name"
      >${s.name}</span
    >`
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>${p.title} · ${s.name}</title>
        <link rel="stylesheet" href="${STYLESHEET_PATH}" />
        ${s.brandCss ? html`<link rel="stylesheet" href="${BRAND_STYLESHEET_PATH}" />` : ''}
        ${(p.scripts ?? []).map((src) => html`<script src="${src}" defer></script>`)}
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="site">
          ${s.homeUrl ? html`<a class="brand" href="${s.homeUrl}">${brand}</a>` : html`<span class="brand">${brand}</span>`}
        </header>
        <main id="main" ${p.wide ? html` class="wide"` : ''}>${p.body}</main>
        <footer class="site">
          ${
            links.length
              ? html`<nav aria-label="About this server">
                  <ul>
                    ${links}
                  </ul>
                </nav>`
              : ''
          }
        </footer>
      </body>
    </html>`
}

/** a page that only says something (an expired request, a refused form) */
export function messagePage(server: ServerInfo, title: string, message: string): SafeHtml {
  return layout({
    title,
    server,
    body: html`<h1>${title}</h1>
      <p>${message}</p>`,
  })
}
