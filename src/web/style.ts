// The one stylesheet of the server's pages, served from the server itself so the content security
// policy needs no inline styles. Colours meet WCAG AA contrast (4.5:1 for text, 3:1 for focus
// rings and borders); every control shows a visible focus ring; one column on small screens.
export const STYLESHEET = `
*,*::before,*::after{box-sizing:border-box}
html{font-size:100%}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#eef0f3;color:#1d2228;margin:0;line-height:1.5}
a{color:#0b57b5}
a:hover{color:#083f84}
:focus-visible{outline:3px solid #1553c7;outline-offset:2px}
.skip{position:absolute;left:-999px;top:0}
.skip:focus{left:.5rem;top:.5rem;background:#fff;padding:.4rem .7rem;z-index:1}
header.site,footer.site{max-width:32rem;margin:0 auto;padding:1rem;color:#4a5560;font-size:.9rem}
header.site{font-weight:600;color:#1d2228}
footer.site ul{list-style:none;display:flex;flex-wrap:wrap;gap:1rem;padding:0;margin:0}
main{max-width:32rem;margin:0 auto;background:#fff;border-radius:12px;padding:1.5rem 1.75rem;box-shadow:0 1px 4px rgba(0,0,0,.14)}
@media (max-width:36rem){main{border-radius:0;padding:1.25rem 1rem}}
h1{font-size:1.35rem;line-height:1.3;margin:0 0 .5rem}
h2{font-size:1.05rem;margin:1.25rem 0 .5rem}
p{margin:.5rem 0}
.muted{color:#4a5560;font-size:.9rem}
.break{word-break:break-all}
label{display:block;margin:.9rem 0 .25rem;font-weight:600}
.hint{display:block;color:#4a5560;font-size:.85rem;font-weight:400}
input[type=text],input[type=password],input[type=email],select{width:100%;padding:.6rem;border:1px solid #6b7580;border-radius:6px;font-size:1rem;background:#fff;color:#1d2228}
.suffix{display:flex;align-items:center;gap:.4rem}
.suffix input{flex:1}
.check{display:flex;align-items:center;gap:.5rem;font-weight:400;margin:.9rem 0}
.check input{width:1.1rem;height:1.1rem}
.alert{background:#fde8e8;color:#7a1616;border:1px solid #c53030;border-radius:6px;padding:.6rem .8rem;margin:0 0 1rem}
.notice{background:#e7f1ff;color:#0d3a78;border:1px solid #3b6fc4;border-radius:6px;padding:.6rem .8rem;margin:0 0 1rem}
.buttons{display:flex;flex-wrap:wrap;gap:.75rem;margin-top:1.25rem}
.buttons>*{flex:1 1 8rem}
button,.button{display:inline-block;text-align:center;text-decoration:none;padding:.65rem 1rem;font-size:1rem;border-radius:6px;border:1px solid #0b57b5;cursor:pointer;background:#fff;color:#0b57b5;font-family:inherit}
button.primary{background:#0b57b5;color:#fff}
button.primary:hover{background:#083f84}
button.link{border:none;background:none;padding:0;color:#0b57b5;text-decoration:underline;font-size:.9rem}
.accounts{list-style:none;padding:0;margin:1rem 0}
.accounts li{display:flex;align-items:center;gap:.5rem;margin:.5rem 0}
.accounts form{margin:0}
.accounts .pick{flex:1}
.account{display:flex;align-items:center;gap:.75rem;width:100%;text-align:left;color:#1d2228;border-color:#6b7580}
.account:hover{background:#f3f6fa}
.initials{display:inline-flex;align-items:center;justify-content:center;width:2.4rem;height:2.4rem;border-radius:50%;background:#2c4a6e;color:#fff;font-weight:700;flex:none}
.client{display:flex;align-items:center;gap:.75rem;margin:0 0 1rem}
.client img{width:3rem;height:3rem;border-radius:8px;object-fit:contain;flex:none}
.perms{list-style:none;padding:0;margin:.5rem 0}
.perms>li{border:1px solid #c9ced4;border-radius:8px;padding:.6rem .8rem;margin:.5rem 0}
.perms strong{display:block}
.perms ul{margin:.25rem 0 0;padding-left:1.2rem;color:#37414b}
details{margin:1rem 0}
summary{cursor:pointer;color:#0b57b5}
code{font-size:.85rem;word-break:break-all}
.links{display:flex;flex-wrap:wrap;gap:1rem;margin-top:1rem;font-size:.9rem}
main.wide{max-width:46rem}
header.site:has(+main.wide),header.site:has(+main.wide)~footer.site{max-width:46rem}
section.card{border-top:1px solid #c9ced4;padding-top:.5rem;margin-top:1.5rem}
.toc{display:flex;flex-wrap:wrap;gap:.4rem 1rem;font-size:.9rem;padding:0;list-style:none;margin:.75rem 0}
.items{list-style:none;padding:0;margin:.5rem 0}
.items>li{border:1px solid #c9ced4;border-radius:8px;padding:.6rem .8rem;margin:.5rem 0}
.items .row{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem;justify-content:space-between}
.items form{margin:0}
.items ul{margin:.25rem 0 0;padding-left:1.2rem;color:#37414b}
.inline{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end}
.inline input{flex:1 1 12rem;width:auto}
.secret{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:1.1rem;background:#f3f6fa;border:1px solid #6b7580;border-radius:6px;padding:.5rem .75rem;display:inline-block;word-break:break-all}
.codes{columns:2;font-family:ui-monospace,Menlo,Consolas,monospace;padding-left:1.5rem}
.qr{width:12rem;height:12rem;background:#fff}
.qr svg{width:100%;height:100%}
button.danger{border-color:#b42318;color:#b42318}
button.danger.primary{background:#b42318;color:#fff}
.badge{display:inline-block;font-size:.8rem;border-radius:999px;padding:0 .5rem;border:1px solid #3b6fc4;color:#0d3a78;background:#e7f1ff}
.badge.warn{border-color:#b54708;color:#7a2e0e;background:#fff4e5}
.radio{display:flex;align-items:center;gap:.5rem;font-weight:400;margin:.5rem 0}
[hidden]{display:none !important}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;margin:0}
h3{font-size:.95rem;margin:1rem 0 .25rem}
`
