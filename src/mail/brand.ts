// Every message the server sends, signed with the service's name and the links the operator set
// (home, support, privacy policy, terms of service), and given an HTML part that carries the logo
// and the primary colour. The plain text stays the message: the HTML part is the same words,
// escaped, with codes set apart so they are easy to copy.
import type { Branding } from '../config.js'
import { escapeHtml as esc } from '../web/html.js'
import type { Mail } from './message.js'

function links(b: Branding): [string, string][] {
  return [
    ['Home', b.homeUrl],
    ['Support', b.supportUrl],
    ['Privacy policy', b.privacyPolicyUrl],
    ['Terms of service', b.termsOfServiceUrl],
  ].filter((l): l is [string, string] => !!l[1])
}

export function brandMail(b: Branding, mail: Mail): Mail {
  const list = links(b)
  const signature = `\n-- \n${b.name}\n` + list.map(([label, url]) => `${label}: ${url}\n`).join('')
  const text = mail.text.replace(/\n*$/, '\n') + signature
  const primary = b.colors.primary ?? '#0b57b5'
  const on = b.colors.primaryContrast ?? '#ffffff'
  // a paragraph per blank-line block; a block of one word (a code) in monospace
  const paragraphs = mail.text
    .trim()
    .split(/\n{2,}/)
    .map((block) =>
      /^\S+$/.test(block.trim())
        ? `<p style="font-family:ui-monospace,Menlo,Consolas,monospace;font-size:20px;letter-spacing:1px;background:#f3f6fa;padding:8px 12px;border-radius:6px">${esc(block.trim())}</p>`
        : `<p>${esc(block).replace(/\n/g, '<br>')}</p>`,
    )
    .join('\n')
  const logo = b.logoUrl
    ? `<img src="${esc(b.logoUrl)}" alt="" height="32" style="height:32px;vertical-align:middle;margin-right:8px">`
    : ''
  const footer = list.map(([label, url]) => `<a href="${esc(url)}" style="color:${primary}">${esc(label)}</a>`).join(' &middot; ')
  const html = `<!doctype html>
<html><head><meta charset="utf-8"><title>${esc(mail.subject)}</title></head>
<body style="margin:0;padding:0;background:#eef0f3;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d2228">
<div style="max-width:560px;margin:0 auto;padding:16px">
<div style="background:${primary};color:${on};padding:12px 16px;border-radius:8px 8px 0 0;font-weight:600">${logo}${esc(b.name)}</div>
<div style="background:#ffffff;padding:16px;border-radius:0 0 8px 8px;line-height:1.5">
${paragraphs}
</div>
<p style="font-size:13px;color:#4a5560;padding:0 4px">${esc(b.name)}${footer ? ' &middot; ' + footer : ''}</p>
</div>
</body></html>
`
  return { ...mail, text, html }
}
