// SVG files imported from TypeScript are bundled as their source text.
declare module '*.svg' {
  const svgstr: string;
  export default svgstr;
}
