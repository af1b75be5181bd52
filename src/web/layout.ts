// The one layout of the server's pages: the server's name at the top, the page in <main>, and the
// links the operator configured (privacy policy, terms of service) at the bottom, the same ones
// describeServer announces. Every page is a plain HTML form; a page may add a script of the
// server's own (passkeys need the browser's WebAuthn API), never an inline one.
import type { Config } from '../config.js'
import { html, type SafeHtml } from './html.js'

export const STYLESHEET_PATH = '/web/style.css'

/** what every page shows about the server */
export type ServerInfo = { name: string; privacyPolicy?: string; termsOfService?: string }

export function serverInfo(config: Pick<Config, 'publicUrl' | 'links'>): ServerInfo {
  return {
    name: new URL(config.publicUrl).host,
    privacyPolicy: config.links.privacyPolicy,
    termsOfService: config.links.termsOfService,
  }
}

export function layout(p: { title: string; server: ServerInfo; body: SafeHtml; scripts?: string[]; wide?: boolean }): SafeHtml {
  const links = [
    p.server.privacyPolicy && html`<li><a href="${p.server.privacyPolicy}">Privacy policy</a></li>`,
    p.server.termsOfService && html`<li><a href="${p.server.termsOfService}">Terms of service</a></li>`,
  ].filter(Boolean) as SafeHtml[]
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>${p.title} · ${p.server.name}</title>
        <link rel="stylesheet" href="${STYLESHEET_PATH}" />
        ${(p.scripts ?? []).map((src) => html`<script src="${src}" defer></script>`)}
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="site">${p.server.name}</header>
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
