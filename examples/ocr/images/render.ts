// Renders the example's test page: clean English text with words, digits and punctuation, in
// DejaVu Sans (Debian's default font). Run: node --import tsx examples/ocr/images/render.ts
// The PNG is committed, so serving and testing never depend on the fonts of the machine.
import { fileURLToPath } from 'node:url'
import sharp from 'sharp'

/** The page's lines, top to bottom: what /read must return. */
export const PAGE_LINES = [
  'Invoice No. 2026-120',
  'Total: $1,234.50 (paid)',
  'The quick brown fox jumps',
  'Call 555-0199 today!',
]

const width = 720
const lineHeight = 64
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${lineHeight * PAGE_LINES.length + 48}">
<rect width="100%" height="100%" fill="white"/>
${PAGE_LINES.map(
  (t, i) =>
    `<text x="${i % 2 ? 64 : 40}" y="${64 + i * lineHeight}" font-family="DejaVu Sans" font-size="30" fill="black">` +
    `${t.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</text>`,
).join('\n')}
</svg>`

/** A form with two fields on one row: reading order is left to right within a row. */
export const FORM_LINES = ['Name: Ada Lovelace', 'Date: 2026-12-02', 'Amount due: 42.00 EUR']
const form = `<svg xmlns="http://www.w3.org/2000/svg" width="760" height="180">
<rect width="100%" height="100%" fill="white"/>
<text x="40" y="60" font-family="DejaVu Sans" font-size="28" fill="black">${FORM_LINES[0]}</text>
<text x="470" y="64" font-family="DejaVu Sans" font-size="28" fill="black">${FORM_LINES[1]}</text>
<text x="40" y="130" font-family="DejaVu Sans" font-size="28" fill="black">${FORM_LINES[2]}</text>
</svg>`

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await sharp(Buffer.from(svg))
    .png()
    .toFile(fileURLToPath(new URL('page.png', import.meta.url)))
  await sharp(Buffer.from(form))
    .png()
    .toFile(fileURLToPath(new URL('form.png', import.meta.url)))
}
